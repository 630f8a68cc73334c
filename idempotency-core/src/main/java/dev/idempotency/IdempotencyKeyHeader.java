package dev.idempotency;

import java.util.regex.Pattern;

/**
 * Parses the {@code Idempotency-Key} request header of the IETF HTTPAPI draft "The Idempotency-Key
 * HTTP Header Field": an RFC 8941 structured-field String ({@code "8e03978e-40d5"}, with {@code \"}
 * and {@code \\} escapes, printable ASCII only), optionally followed by parameters, which are
 * ignored. A bare token ({@code 8e03978e-40d5}) is accepted too, since many clients send one. The
 * key must then be a valid {@link IdempotencyKey}.
 *
 * <p>Stateless and thread-safe.
 */
public final class IdempotencyKeyHeader {

  /** The header's name. */
  public static final String NAME = "Idempotency-Key";

  private static final Pattern TOKEN = Pattern.compile("[A-Za-z0-9!#$%&'*+.^_`|~:/=-]+");

  private IdempotencyKeyHeader() {}

  /**
   * Parses the header's value.
   *
   * @param value the raw header value
   * @return the key
   * @throws IllegalArgumentException naming what is wrong with it
   */
  public static String parse(String value) {
    return parse(NAME, value);
  }

  /**
   * Parses the value of a header of another name that follows the same rules.
   *
   * @param name the header's name, for the messages
   * @param value the raw header value
   * @return the key
   * @throws IllegalArgumentException naming what is wrong with it
   */
  public static String parse(String name, String value) {
    if (value == null) {
      throw new IllegalArgumentException("missing " + name + " header");
    }
    String trimmed = value.strip();
    String key;
    if (trimmed.startsWith("\"")) {
      key = parseString(name, trimmed);
    } else if (TOKEN.matcher(trimmed).matches()) {
      key = trimmed;
    } else {
      throw new IllegalArgumentException(
          name + " must be a quoted structured-field string or a token");
    }
    if (key.isEmpty()) {
      throw new IllegalArgumentException(name + " must not be empty");
    }
    return IdempotencyKey.requireValid(key);
  }

  private static String parseString(String name, String value) {
    StringBuilder key = new StringBuilder();
    for (int i = 1; i < value.length(); i++) {
      char c = value.charAt(i);
      if (c == '\\') {
        if (i + 1 >= value.length()
            || (value.charAt(i + 1) != '"' && value.charAt(i + 1) != '\\')) {
          throw new IllegalArgumentException(name + " has a bad escape");
        }
        key.append(value.charAt(++i));
      } else if (c == '"') {
        String rest = value.substring(i + 1).strip();
        if (!rest.isEmpty() && !rest.startsWith(";")) {
          throw new IllegalArgumentException(name + " has text after the string");
        }
        return key.toString();
      } else if (c < 0x20 || c > 0x7e) {
        throw new IllegalArgumentException(name + " must be printable ASCII");
      } else {
        key.append(c);
      }
    }
    throw new IllegalArgumentException(name + " has an unterminated string");
  }
}
