package dev.idempotency.examples.http;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import dev.idempotency.RequestFingerprints;

/**
 * JSON for the example server, on Jackson: strict parsing (a duplicate key or trailing garbage is a
 * 400), writing, and the request fingerprint, which is the SHA-256 of the body's RFC 8785 canonical
 * form ({@link RequestFingerprints}, shared with the Spring Boot starter), so that a client that
 * re-serialises its body (other key order, whitespace, {@code 1e2} for {@code 100}) still matches.
 */
final class Json {

  private static final ObjectMapper MAPPER =
      JsonMapper.builder()
          .enable(JsonParser.Feature.STRICT_DUPLICATE_DETECTION)
          .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
          .build();

  private Json() {}

  /**
   * Parses a body into maps, lists, strings, numbers, booleans and nulls.
   *
   * @throws IllegalArgumentException naming what is wrong, if it is not one JSON value
   */
  static Object parse(String body) {
    try {
      return MAPPER.readValue(body, Object.class);
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException("the body is not valid JSON: " + e.getOriginalMessage());
    }
  }

  /** Writes a value as JSON. */
  static String write(Object value) {
    try {
      return MAPPER.writeValueAsString(value);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException("could not write JSON", e);
    }
  }

  /** The fingerprint of a parsed body: SHA-256 of its RFC 8785 canonical form, in hex. */
  static String fingerprint(Object parsed) {
    return RequestFingerprints.ofJson(parsed);
  }

  /** The RFC 8785 canonical form of a parsed value. */
  static String canonical(Object parsed) {
    return RequestFingerprints.canonicalJson(parsed);
  }
}
