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
    return parse(name, value, IdempotencyKey.MAX_LENGTH);
  }

  /**
   * Parses the value of a header whose key may be at most {@code maxLength} characters, as where
   * the key is stored with a prefix of its own (an HTTP endpoint scopes it to the method, the path
   * and the client): a key that is too long is a {@link TooLongException}, one limit however far it
   * is over.
   *
   * @param name the header's name, for the messages
   * @param value the raw header value
   * @param maxLength the most characters the key may have, 1 to {@value IdempotencyKey#MAX_LENGTH}
   * @return the key
   * @throws TooLongException if the key is longer than {@code maxLength}
   * @throws IllegalArgumentException naming what else is wrong with it (a list of keys among them)
   */
  public static String parse(String name, String value, int maxLength) {
    if (maxLength < 1 || maxLength > IdempotencyKey.MAX_LENGTH) {
      throw new IllegalArgumentException(
          "maxLength must be 1 to " + IdempotencyKey.MAX_LENGTH + ", was " + maxLength);
    }
    if (value == null) {
      throw new IllegalArgumentException("missing " + name + " header");
    }
    String trimmed = value.strip();
    String key;
    if (trimmed.startsWith("\"")) {
      key = parseString(name, trimmed);
    } else if (TOKEN.matcher(trimmed).matches()) {
      key = trimmed;
    } else if (trimmed.indexOf(',') >= 0) {
      throw new IllegalArgumentException(name + " must hold one key, not a list");
    } else {
      throw new IllegalArgumentException(
          name + " must be a quoted structured-field string or a token");
    }
    if (key.isEmpty()) {
      throw new IllegalArgumentException(name + " must not be empty");
    }
    if (key.length() > maxLength) {
      throw new TooLongException(name, key.length(), maxLength);
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
        if (rest.startsWith(",")) {
          throw new IllegalArgumentException(name + " must hold one key, not a list");
        }
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

  /** A key longer than the header allows: the limit is {@link #maxLength()} characters. */
  public static final class TooLongException extends IllegalArgumentException {
    private static final long serialVersionUID = 1L;

    /** The key's length. */
    private final int length;

    /** The most characters a key may have. */
    private final int maxLength;

    TooLongException(String name, int length, int maxLength) {
      super(name + " must be at most " + maxLength + " characters, was " + length);
      this.length = length;
      this.maxLength = maxLength;
    }

    /**
     * The key's length.
     *
     * @return its characters
     */
    public int length() {
      return length;
    }

    /**
     * The most characters the key may have.
     *
     * @return the limit
     */
    public int maxLength() {
      return maxLength;
    }
  }
}
