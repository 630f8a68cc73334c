package dev.idempotency.spring;

import dev.idempotency.RequestFingerprints;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * Fingerprints of JSON values that keep every number exact: the starter's request fingerprint for
 * JSON bodies ({@link dev.idempotency.spring.web.IdempotentEndpoint}) and for {@link
 * Idempotent#fingerprint()}.
 *
 * <p>The canonical form is RFC 8785's (the JSON Canonicalization Scheme: members sorted by name, no
 * white space, minimal string escapes, numbers in ECMAScript's notation), with one deliberate
 * departure: RFC 8785 writes each number as the IEEE 754 double nearest to it, so {@code
 * 1234567890123456789} and {@code 1234567890123456788} (two 64-bit ids) both become {@code
 * 1234567890123456800} and would be the same request. Here a number keeps all its significant
 * digits: equal values in any spelling ({@code 1}, {@code 1.0}, {@code 1e0}, {@code 10E-1}) have
 * one form, values that differ in any digit keep different ones. For every number that an IEEE
 * double holds as written (up to 15 significant digits, within the double's range) the form is the
 * same as RFC 8785's.
 *
 * <p>Thread-safe and stateless.
 */
public final class JsonFingerprints {

  private JsonFingerprints() {}

  /**
   * The fingerprint of a parsed JSON value: the SHA-256 of its canonical form, in hex.
   *
   * @param json plain Java values: {@link Map} with string keys, {@link List}, {@link String},
   *     {@link Number} (best {@link BigDecimal} and {@link BigInteger}, as {@link
   *     JsonCodecs#readTree} gives them), {@link Boolean}, {@code null}
   * @return 64 lower-case hex digits
   * @throws IllegalArgumentException if the value holds something JSON cannot (a non-finite number,
   *     a key that is not a string, another type)
   */
  public static String of(@Nullable Object json) {
    return RequestFingerprints.ofBytes(canonicalJson(json).getBytes(StandardCharsets.UTF_8));
  }

  /**
   * The canonical form of a parsed JSON value (see the class documentation).
   *
   * @param json plain Java values, as for {@link #of(Object)}
   * @return the canonical JSON text
   * @throws IllegalArgumentException if the value holds something JSON cannot
   */
  public static String canonicalJson(@Nullable Object json) {
    StringBuilder out = new StringBuilder();
    write(json, out);
    return out.toString();
  }

  private static void write(@Nullable Object value, StringBuilder out) {
    if (value instanceof Number number) {
      out.append(number(number));
    } else if (value instanceof Map<?, ?> map) {
      List<String> names = new ArrayList<>(map.size());
      for (Object name : map.keySet()) {
        if (!(name instanceof String text)) {
          throw new IllegalArgumentException("a JSON object's member names must be strings");
        }
        names.add(text);
      }
      Collections.sort(names); // UTF-16 code unit order, as RFC 8785 asks
      out.append('{');
      for (int i = 0; i < names.size(); i++) {
        out.append(i > 0 ? "," : "");
        out.append(RequestFingerprints.canonicalJson(names.get(i))).append(':');
        write(map.get(names.get(i)), out);
      }
      out.append('}');
    } else if (value instanceof List<?> list) {
      out.append('[');
      for (int i = 0; i < list.size(); i++) {
        out.append(i > 0 ? "," : "");
        write(list.get(i), out);
      }
      out.append(']');
    } else {
      // null, strings and booleans are written as RFC 8785 writes them; other types refused there
      out.append(RequestFingerprints.canonicalJson(value));
    }
  }

  /**
   * A number's exact canonical form: its shortest exact digits, placed as ECMAScript places a
   * double's shortest digits (plain from 1e-6 up to 1e21, exponent notation outside).
   */
  static String number(Number number) {
    BigDecimal value = exact(number).stripTrailingZeros();
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
}
