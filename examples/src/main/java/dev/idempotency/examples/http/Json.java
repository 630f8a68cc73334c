package dev.idempotency.examples.http;

import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * A small, strict JSON reader and writer for the example (RFC 8259 values: objects, arrays,
 * strings, numbers, booleans, null). {@link #canonical} writes objects with sorted keys and no
 * spaces, so two bodies that mean the same thing get the same fingerprint.
 */
public final class Json {

  private final String text;
  private int pos;

  private Json(String text) {
    this.text = text;
  }

  /**
   * Parses one JSON value.
   *
   * @param text the JSON text
   * @return a {@code Map<String,Object>}, {@code List<Object>}, {@code String}, {@code BigDecimal},
   *     {@code Boolean} or {@code null}
   * @throws IllegalArgumentException if the text is not valid JSON
   */
  public static Object parse(String text) {
    Json parser = new Json(text);
    parser.skipWhitespace();
    Object value = parser.value();
    parser.skipWhitespace();
    if (parser.pos != text.length()) {
      throw parser.error("unexpected text after the value");
    }
    return value;
  }

  /**
   * Writes a value with object keys sorted and no insignificant whitespace.
   *
   * @param value a value as {@link #parse} returns it (maps may have any key order)
   * @return canonical JSON
   */
  public static String canonical(Object value) {
    StringBuilder out = new StringBuilder();
    write(value, out, true);
    return out.toString();
  }

  /**
   * Writes a value, keeping the maps' own key order.
   *
   * @param value the value
   * @return JSON
   */
  public static String write(Object value) {
    StringBuilder out = new StringBuilder();
    write(value, out, false);
    return out.toString();
  }

  private static void write(Object value, StringBuilder out, boolean sorted) {
    if (value == null) {
      out.append("null");
    } else if (value instanceof String s) {
      quote(s, out);
    } else if (value instanceof Boolean || value instanceof Number) {
      out.append(value instanceof BigDecimal d ? d.toString() : value.toString());
    } else if (value instanceof Map<?, ?> map) {
      Map<?, ?> entries = sorted ? new TreeMap<>(map) : map;
      out.append('{');
      boolean first = true;
      for (Map.Entry<?, ?> entry : entries.entrySet()) {
        if (!first) {
          out.append(',');
        }
        first = false;
        quote(entry.getKey().toString(), out);
        out.append(':');
        write(entry.getValue(), out, sorted);
      }
      out.append('}');
    } else if (value instanceof List<?> list) {
      out.append('[');
      for (int i = 0; i < list.size(); i++) {
        if (i > 0) {
          out.append(',');
        }
        write(list.get(i), out, sorted);
      }
      out.append(']');
    } else {
      throw new IllegalArgumentException("not a JSON value: " + value.getClass().getName());
    }
  }

  private static void quote(String s, StringBuilder out) {
    out.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"' -> out.append("\\\"");
        case '\\' -> out.append("\\\\");
        case '\n' -> out.append("\\n");
        case '\r' -> out.append("\\r");
        case '\t' -> out.append("\\t");
        default -> {
          if (c < 0x20) {
            out.append(String.format("\\u%04x", (int) c));
          } else {
            out.append(c);
          }
        }
      }
    }
    out.append('"');
  }

  private Object value() {
    if (pos >= text.length()) {
      throw error("unexpected end of input");
    }
    char c = text.charAt(pos);
    switch (c) {
      case '{':
        return object();
      case '[':
        return array();
      case '"':
        return string();
      case 't':
        return literal("true", Boolean.TRUE);
      case 'f':
        return literal("false", Boolean.FALSE);
      case 'n':
        return literal("null", null);
      default:
        if (c == '-' || (c >= '0' && c <= '9')) {
          return number();
        }
        throw error("unexpected character '" + c + "'");
    }
  }

  private Map<String, Object> object() {
    Map<String, Object> map = new LinkedHashMap<>();
    pos++;
    skipWhitespace();
    if (peek('}')) {
      pos++;
      return map;
    }
    while (true) {
      skipWhitespace();
      if (!peek('"')) {
        throw error("expected a string key");
      }
      String key = string();
      skipWhitespace();
      expect(':');
      skipWhitespace();
      if (map.put(key, value()) != null) {
        throw error("duplicate key \"" + key + "\"");
      }
      skipWhitespace();
      if (peek(',')) {
        pos++;
      } else {
        expect('}');
        return map;
      }
    }
  }

  private List<Object> array() {
    List<Object> list = new ArrayList<>();
    pos++;
    skipWhitespace();
    if (peek(']')) {
      pos++;
      return list;
    }
    while (true) {
      skipWhitespace();
      list.add(value());
      skipWhitespace();
      if (peek(',')) {
        pos++;
      } else {
        expect(']');
        return list;
      }
    }
  }

  private String string() {
    pos++;
    StringBuilder out = new StringBuilder();
    while (pos < text.length()) {
      char c = text.charAt(pos++);
      if (c == '"') {
        return out.toString();
      }
      if (c < 0x20) {
        throw error("control character in a string");
      }
      if (c != '\\') {
        out.append(c);
        continue;
      }
      if (pos >= text.length()) {
        break;
      }
      char escaped = text.charAt(pos++);
      switch (escaped) {
        case '"', '\\', '/' -> out.append(escaped);
        case 'b' -> out.append('\b');
        case 'f' -> out.append('\f');
        case 'n' -> out.append('\n');
        case 'r' -> out.append('\r');
        case 't' -> out.append('\t');
        case 'u' -> {
          if (pos + 4 > text.length()) {
            throw error("short \\u escape");
          }
          try {
            out.append((char) Integer.parseInt(text.substring(pos, pos + 4), 16));
          } catch (NumberFormatException e) {
            throw error("bad \\u escape");
          }
          pos += 4;
        }
        default -> throw error("bad escape \\" + escaped);
      }
    }
    throw error("unterminated string");
  }

  private BigDecimal number() {
    int start = pos;
    if (peek('-')) {
      pos++;
    }
    while (pos < text.length() && "0123456789.eE+-".indexOf(text.charAt(pos)) >= 0) {
      pos++;
    }
    String number = text.substring(start, pos);
    if (!number.matches("-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?")) {
      throw error("bad number " + number);
    }
    return new BigDecimal(number);
  }

  private Object literal(String word, Object value) {
    if (!text.startsWith(word, pos)) {
      throw error("unexpected literal");
    }
    pos += word.length();
    return value;
  }

  private boolean peek(char c) {
    return pos < text.length() && text.charAt(pos) == c;
  }

  private void expect(char c) {
    if (!peek(c)) {
      throw error("expected '" + c + "'");
    }
    pos++;
  }

  private void skipWhitespace() {
    while (pos < text.length() && " \t\r\n".indexOf(text.charAt(pos)) >= 0) {
      pos++;
    }
  }

  private IllegalArgumentException error(String message) {
    return new IllegalArgumentException("invalid JSON at offset " + pos + ": " + message);
  }
}
