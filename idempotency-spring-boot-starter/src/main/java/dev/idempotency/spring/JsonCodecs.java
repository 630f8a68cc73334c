package dev.idempotency.spring;

import dev.idempotency.ResultCodec;
import java.io.IOException;
import java.lang.reflect.Type;

/**
 * The application's JSON mapper, as the starter uses it: to store the results of {@link Idempotent}
 * methods with their declared generic types, and to read request bodies for fingerprints. The
 * auto-configuration provides one on Jackson 3 (Spring Boot 4) or Jackson 2 (Spring Boot 3.5) from
 * the application's own mapper; define a bean of this type to use another.
 */
public interface JsonCodecs {

  /**
   * A codec for values of a type, generics included ({@code List<Receipt>}, {@code
   * Optional<Receipt>}).
   *
   * @param type the declared type
   * @param <T> the type
   * @return a codec that writes and reads JSON
   */
  <T> ResultCodec<T> codecFor(Type type);

  /**
   * Reads a JSON document into plain Java values ({@code Map}, {@code List}, {@code String}, {@code
   * Boolean}, {@code null}, and numbers as {@code BigDecimal} or {@code BigInteger}, never
   * rounded), for {@link dev.idempotency.RequestFingerprints#ofJson(Object)}.
   *
   * @param json the document
   * @return the value
   * @throws IOException if it is not JSON, or not one value: anything but whitespace after the
   *     value (a second value, as in a stream of JSON values, which Spring WebFlux decodes into a
   *     {@code Flux} of all of them) must fail, so that the body is not fingerprinted by its first
   *     value only
   */
  Object readTree(byte[] json) throws IOException;

  /**
   * The fingerprint of a JSON document: {@link JsonFingerprints#of}{@code (readTree(json))}, which
   * this default computes. The starter's codecs compute the same value from the parser's stream
   * without building the tree.
   *
   * @param json the document
   * @return 64 lower-case hex digits
   * @throws IOException if it is not JSON, or not one value (as {@link #readTree})
   * @throws IllegalArgumentException if it holds something the canonical form cannot (a non-finite
   *     number that the mapper was configured to accept)
   */
  default String fingerprint(byte[] json) throws IOException {
    return JsonFingerprints.of(readTree(json));
  }
}
