package dev.idempotency.spring.web;

import dev.idempotency.RequestFingerprints;
import dev.idempotency.spring.JsonCodecs;
import dev.idempotency.spring.JsonFingerprints;
import java.io.IOException;
import java.net.URLDecoder;
import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
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
   * and the body, canonical JSON for a JSON body, a form by its parameters sorted by name (as on
   * Spring MVC), its bytes otherwise.
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
    // sized for the path, a 64-digit digest and the prefixes: one array, not three growths
    StringBuilder what = new StringBuilder(path.length() + 96);
    what.append(path).append('?').append(Objects.toString(query, "")).append('\n');
    MediaType media = parse(contentType); // once per request, not once per question
    MediaType form =
        media != null && media.isCompatibleWith(MediaType.APPLICATION_FORM_URLENCODED)
            ? media
            : null;
    String parameters = form != null ? form(bytes, form) : null;
    if (parameters != null) {
      what.append("form:").append(parameters);
    } else if (bytes.length > 0 && media != null && isJson(media)) {
      what.append("json:").append(json(bytes, json));
    } else {
      what.append("bytes:").append(RequestFingerprints.ofBytes(bytes));
    }
    return RequestFingerprints.ofBytes(what.toString().getBytes(StandardCharsets.UTF_8));
  }

  /**
   * The fingerprint of a multipart request whose parts were described elsewhere (Spring WebFlux):
   * the path, the query and the parts, each described as {@link RequestFingerprint} describes a
   * servlet request's part.
   *
   * @param path the request's path
   * @param query the raw query, or null
   * @param parts the parts' descriptions, sorted by name, in order within a name
   */
  static String ofParts(String path, @Nullable String query, List<Object> parts) {
    String what =
        path + '?' + Objects.toString(query, "") + '\n' + "multipart:" + JsonFingerprints.of(parts);
    return RequestFingerprints.ofBytes(what.getBytes(StandardCharsets.UTF_8));
  }

  /** The content type parsed, or null if there is none or it does not parse. */
  private static @Nullable MediaType parse(@Nullable String type) {
    if (type == null) {
      return null;
    }
    try {
      return MediaType.parseMediaType(type);
    } catch (IllegalArgumentException unparsable) {
      return null;
    }
  }

  /**
   * A form body's parameters, sorted by name, in order within a name; null if it is not one (a
   * malformed escape), which then counts by its bytes.
   */
  private static @Nullable String form(byte[] bytes, MediaType type) {
    Charset charset = type.getCharset() != null ? type.getCharset() : StandardCharsets.UTF_8;
    Map<String, List<String>> sorted = new TreeMap<>();
    try {
      for (String pair : new String(bytes, charset).split("&")) {
        if (pair.isEmpty()) {
          continue;
        }
        int equals = pair.indexOf('=');
        String name = equals < 0 ? pair : pair.substring(0, equals);
        String value = equals < 0 ? "" : pair.substring(equals + 1);
        sorted
            .computeIfAbsent(URLDecoder.decode(name, charset), n -> new ArrayList<>())
            .add(URLDecoder.decode(value, charset));
      }
    } catch (IllegalArgumentException malformed) {
      log.debug("A form body with a malformed escape is fingerprinted by its bytes", malformed);
      return null;
    }
    return JsonFingerprints.of(sorted);
  }

  static String json(byte[] bytes, @Nullable JsonCodecs json) {
    if (json != null) {
      try {
        return json.fingerprint(bytes);
      } catch (IOException | IllegalArgumentException notJson) {
        log.debug("A JSON body that does not parse is fingerprinted by its bytes", notJson);
      }
    }
    return RequestFingerprints.ofBytes(bytes);
  }

  static boolean isJson(@Nullable String type) {
    MediaType media = parse(type);
    return media != null && isJson(media);
  }

  private static boolean isJson(MediaType media) {
    return media.isCompatibleWith(MediaType.APPLICATION_JSON)
        || media.getSubtype().endsWith("+json");
  }
}
