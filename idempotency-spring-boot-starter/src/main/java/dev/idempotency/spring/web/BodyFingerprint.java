package dev.idempotency.spring.web;

import dev.idempotency.RequestFingerprints;
import dev.idempotency.spring.JsonCodecs;
import dev.idempotency.spring.JsonFingerprints;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Objects;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.http.MediaType;

/**
 * The fingerprint of a body held in memory: canonical JSON for a JSON body, its bytes otherwise.
 * Free of the servlet API, so that a Spring WebFlux application, which has none, can load it;
 * {@link RequestFingerprint} adds the servlet request's form and multipart bodies.
 */
final class BodyFingerprint {

  private static final Logger log = LoggerFactory.getLogger(IdempotentEndpoint.class);

  private BodyFingerprint() {}

  /**
   * The fingerprint of a request whose body is held in memory (Spring WebFlux): the path, the query
   * and the body, canonical JSON for a JSON body, its bytes otherwise.
   *
   * @param path the request's path
   * @param query the raw query, or null
   * @param contentType the body's content type, or null
   * @param bytes the body
   * @param json the application's JSON mapper, or null (JSON then counts by its bytes)
   */
  static String ofBody(
      String path,
      @Nullable String query,
      @Nullable String contentType,
      byte[] bytes,
      @Nullable JsonCodecs json) {
    StringBuilder what = new StringBuilder();
    what.append(path).append('?').append(Objects.toString(query, "")).append('\n');
    if (bytes.length > 0 && isJson(contentType)) {
      what.append("json:").append(json(bytes, json));
    } else {
      what.append("bytes:").append(RequestFingerprints.ofBytes(bytes));
    }
    return RequestFingerprints.ofBytes(what.toString().getBytes(StandardCharsets.UTF_8));
  }

  static String json(byte[] bytes, @Nullable JsonCodecs json) {
    if (json != null) {
      try {
        return JsonFingerprints.of(json.readTree(bytes));
      } catch (IOException | IllegalArgumentException notJson) {
        log.debug("A JSON body that does not parse is fingerprinted by its bytes", notJson);
      }
    }
    return RequestFingerprints.ofBytes(bytes);
  }

  static boolean isJson(@Nullable String type) {
    if (type == null) {
      return false;
    }
    try {
      MediaType media = MediaType.parseMediaType(type);
      return media.isCompatibleWith(MediaType.APPLICATION_JSON)
          || media.getSubtype().endsWith("+json");
    } catch (IllegalArgumentException unparsable) {
      return false;
    }
  }
}
