package dev.idempotency;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.MathContext;
import java.math.RoundingMode;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;

/**
 * Request fingerprints for {@link IdempotencyRequest#withFingerprint(String)}: a repeat of a key
 * with another fingerprint is refused ({@link IdempotencyKeyReuseException}) instead of replaying
 * another request's result.
 *
 * <p>A JSON body is fingerprinted by its canonical form, RFC 8785's (the JSON Canonicalization
 * Scheme): object members sorted by their names' UTF-16 code units, no white space, strings escaped
 * minimally, numbers in ECMAScript's notation. So a client that re-serialises its body (another key
 * order, {@code 1e2} for {@code 100}, {@code 4.50} for {@code 4.5}) still sends the same request.
 * One deliberate departure: RFC 8785 writes each number as the IEEE 754 double nearest to it, so
 * {@code 1234567890123456789} and {@code 1234567890123456788} (two 64-bit ids) would both become
 * {@code 1234567890123456800}, one request. Here a number keeps all its significant digits: equal
 * values in any spelling have one form, values that differ in any digit keep different ones. For
 * every number a double holds as written (up to 15 significant digits) the form is RFC 8785's.
 * Parse the body with any JSON library into plain Java values first: {@link Map} with string keys,
 * {@link List}, {@link String}, {@link Number}, {@link Boolean} and {@code null} (with Jackson,
 * {@code readValue(bytes, Object.class)}; enable {@code USE_BIG_DECIMAL_FOR_FLOATS} so that no
 * number is rounded before this class sees it).
 *
 * <p>Thread-safe and stateless.
 */
public final class RequestFingerprints {

  private static final HexFormat HEX = HexFormat.of();

  private RequestFingerprints() {}

  /**
   * The fingerprint of a parsed JSON value: the SHA-256 of its canonical form, in hex.
   *
   * @param json the parsed value (see the class documentation)
   * @return 64 lower-case hex digits
   * @throws IllegalArgumentException if the value holds something JSON cannot (a non-finite number,
   *     a map key that is not a string, an object of another type)
   */
  public static String ofJson(Object json) {
    return sha256Hex(canonicalJson(json).getBytes(StandardCharsets.UTF_8));
  }

  /**
   * The fingerprint of a body that is not JSON: the SHA-256 of its bytes, in hex.
   *
   * @param body the bytes
   * @return 64 lower-case hex digits
   */
  public static String ofBytes(byte[] body) {
    return sha256Hex(body);
  }

  /**
   * The RFC 8785 canonical form of a parsed JSON value.
   *
   * @param json the parsed value (see the class documentation)
   * @return the canonical JSON text
   * @throws IllegalArgumentException if the value holds something JSON cannot
   */
  public static String canonicalJson(Object json) {
    StringBuilder out = new StringBuilder();
    write(json, out);
    return out.toString();
  }

  private static void write(Object value, StringBuilder out) {
    if (value == null) {
      out.append("null");
    } else if (value instanceof String text) {
      writeString(text, out);
    } else if (value instanceof Boolean bool) {
      out.append(bool.booleanValue());
    } else if (value instanceof Number number) {
      out.append(exactNumber(number));
    } else if (value instanceof Map<?, ?> map) {
      List<String> names = new ArrayList<>(map.size());
      for (Object name : map.keySet()) {
        if (!(name instanceof String text)) {
          throw new IllegalArgumentException("a JSON object's member names must be strings");
        }
        names.add(text);
      }
      Collections.sort(names); // String order is UTF-16 code unit order, as RFC 8785 asks
      out.append('{');
      for (int i = 0; i < names.size(); i++) {
        if (i > 0) {
          out.append(',');
        }
        writeString(names.get(i), out);
        out.append(':');
        write(map.get(names.get(i)), out);
      }
      out.append('}');
    } else if (value instanceof List<?> list) {
      out.append('[');
      for (int i = 0; i < list.size(); i++) {
        if (i > 0) {
          out.append(',');
        }
        write(list.get(i), out);
      }
      out.append(']');
    } else {
      throw new IllegalArgumentException("not a parsed JSON value: " + value.getClass().getName());
    }
  }

  /**
   * A number's exact canonical form: its shortest exact digits, placed as ECMAScript places a
   * double's shortest digits (plain from 1e-6 up to 1e21, exponent notation outside).
   */
  static String exactNumber(Number number) {
    BigDecimal value;
    try {
      value = exact(number).stripTrailingZeros();
    } catch (ArithmeticException outOfRange) {
      // 100e2147483647: without its trailing zeros, its scale would pass int's range
      throw new IllegalArgumentException(
          "a JSON number whose exponent is out of range", outOfRange);
    }
    if (value.signum() == 0) {
      return "0";
    }
    String sign = value.signum() < 0 ? "-" : "";
    String digits = value.unscaledValue().abs().toString();
    int k = digits.length();
    long n = (long) k - value.scale(); // value = 0.digits x 10^n
    if (k <= n && n <= 21) {
      return sign + digits + "0".repeat((int) (n - k));
    }
    if (0 < n && n <= 21) {
      return sign + digits.substring(0, (int) n) + '.' + digits.substring((int) n);
    }
    if (-6 < n && n <= 0) {
      return sign + "0." + "0".repeat((int) -n) + digits;
    }
    String exponent = (n - 1 >= 0 ? "+" : "-") + Math.abs(n - 1);
    return sign + (k == 1 ? digits : digits.charAt(0) + "." + digits.substring(1)) + 'e' + exponent;
  }

  private static BigDecimal exact(Number number) {
    if (number instanceof BigDecimal decimal) {
      return decimal;
    }
    if (number instanceof BigInteger integer) {
      return new BigDecimal(integer);
    }
    if (number instanceof Long
        || number instanceof Integer
        || number instanceof Short
        || number instanceof Byte) {
      return BigDecimal.valueOf(number.longValue());
    }
    double d = number.doubleValue();
    if (Double.isNaN(d) || Double.isInfinite(d)) {
      throw new IllegalArgumentException("JSON has no number " + d);
    }
    // a double or float as its shortest decimal (what a parser that produced it was given)
    return number instanceof Float f ? new BigDecimal(Float.toString(f)) : BigDecimal.valueOf(d);
  }

  private static void writeString(String text, StringBuilder out) {
    out.append('"');
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      switch (c) {
        case '"' -> out.append("\\\"");
        case '\\' -> out.append("\\\\");
        case '\b' -> out.append("\\b");
        case '\f' -> out.append("\\f");
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

  /**
   * A double as ECMAScript's {@code Number.prototype.toString} writes it (ECMA-262, 7.1.12.1): the
   * shortest digits that read back as the same double, in plain notation from 1e-6 to 1e21 and in
   * exponent notation outside.
   */
  static String number(double value) {
    if (Double.isNaN(value) || Double.isInfinite(value)) {
      throw new IllegalArgumentException("JSON has no number " + value);
    }
    if (value == 0) {
      return "0"; // and -0
    }
    if (value < 0) {
      return "-" + number(-value);
    }
    BigDecimal shortest = shortestDigits(value);
    String digits = shortest.unscaledValue().toString();
    int k = digits.length();
    int n = k - shortest.scale(); // value = digits x 10^(n - k)
    if (k <= n && n <= 21) {
      return digits + "0".repeat(n - k);
    }
    if (0 < n && n <= 21) {
      return digits.substring(0, n) + '.' + digits.substring(n);
    }
    if (-6 < n && n <= 0) {
      return "0." + "0".repeat(-n) + digits;
    }
    String exponent = (n - 1 >= 0 ? "+" : "-") + Math.abs(n - 1);
    return k == 1
        ? digits + 'e' + exponent
        : digits.charAt(0) + "." + digits.substring(1) + 'e' + exponent;
  }

  /**
   * The fewest significant digits that read back as {@code value}; of two candidates with that
   * many, the one nearer the exact value, and of two as near, the even one.
   */
  private static BigDecimal shortestDigits(double value) {
    BigDecimal exact = new BigDecimal(value);
    for (int precision = 1; precision <= 17; precision++) {
      BigDecimal below = exact.round(new MathContext(precision, RoundingMode.FLOOR));
      BigDecimal above = exact.round(new MathContext(precision, RoundingMode.CEILING));
      boolean belowReads = below.doubleValue() == value;
      boolean aboveReads = above.doubleValue() == value;
      if (belowReads && aboveReads && below.compareTo(above) != 0) {
        int nearer = exact.subtract(below).compareTo(above.subtract(exact));
        if (nearer != 0) {
          return (nearer < 0 ? below : above).stripTrailingZeros();
        }
        boolean belowEven = !below.unscaledValue().testBit(0);
        return (belowEven ? below : above).stripTrailingZeros();
      }
      if (belowReads) {
        return below.stripTrailingZeros();
      }
      if (aboveReads) {
        return above.stripTrailingZeros();
      }
    }
    return exact.round(MathContext.DECIMAL64).stripTrailingZeros(); // unreachable for doubles
  }

  /** The thread's SHA-256, as the key's digests use: looked up once, not on every fingerprint. */
  private static String sha256Hex(byte[] bytes) {
    return HEX.formatHex(Digests.sha256(bytes));
  }
}
