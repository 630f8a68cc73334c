package dev.idempotency.spring;

import dev.idempotency.RequestFingerprints;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * Fingerprints of JSON values that keep every number exact, as core's {@link RequestFingerprints}
 * computes them: the starter's request fingerprint for JSON bodies ({@link
 * dev.idempotency.spring.web.IdempotentEndpoint}) and for {@link Idempotent#fingerprint()}.
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
    return RequestFingerprints.ofJson(json);
  }

  /**
   * The canonical form of a parsed JSON value (see the class documentation).
   *
   * @param json plain Java values, as for {@link #of(Object)}
   * @return the canonical JSON text
   * @throws IllegalArgumentException if the value holds something JSON cannot
   */
  public static String canonicalJson(@Nullable Object json) {
    return RequestFingerprints.canonicalJson(json);
  }
}
