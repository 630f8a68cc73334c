package dev.idempotency.spring.web;

import dev.idempotency.RequestFingerprints;
import dev.idempotency.spring.JsonCodecs;
import jakarta.servlet.http.HttpServletRequest;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.http.MediaType;

/**
 * A request's body as {@link IdempotentEndpointFilter} reads it (bounded; its bytes, or the form
 * parameters the container parsed from it), and the fingerprint that says whether two requests
 * under one key are the same request.
 */
final class RequestBody {

  private static final Logger log = LoggerFactory.getLogger(IdempotentEndpointFilter.class);

  private final byte[] bytes;
  private final Map<String, String[]> form;

  private RequestBody(byte[] bytes, Map<String, String[]> form) {
    this.bytes = bytes;
    this.form = form;
  }

  /** Reads the body, or returns null if it is larger than the limit (it is then not read). */
  static RequestBody read(HttpServletRequest request, long maxBodyBytes) throws IOException {
    long declared = request.getContentLengthLong();
    if (declared > maxBodyBytes) {
      return null;
    }
    if (isForm(request)) {
      return new RequestBody(new byte[0], request.getParameterMap());
    }
    try (InputStream in = request.getInputStream()) {
      byte[] bytes = in.readNBytes((int) Math.min(Integer.MAX_VALUE - 8, maxBodyBytes + 1));
      return bytes.length > maxBodyBytes ? null : new RequestBody(bytes, null);
    }
  }

  /** The request with this body readable again by the handler. */
  HttpServletRequest replayable(HttpServletRequest request) {
    return form != null ? request : new CachedBodyRequest(request, bytes);
  }

  /**
   * What makes two requests the same: the path and query, and the body (a JSON body by its
   * canonical form, a form by its sorted parameters, anything else by its bytes).
   *
   * @param json the application's JSON mapper, asked only for a JSON body; may supply null (JSON
   *     bodies then count by their bytes)
   */
  String fingerprint(HttpServletRequest request, Supplier<JsonCodecs> json) {
    StringBuilder what = new StringBuilder();
    what.append(request.getRequestURI())
        .append('?')
        .append(Objects.toString(request.getQueryString(), ""));
    what.append('\n');
    if (form != null) {
      Map<String, Object> sorted = new TreeMap<>();
      form.forEach((name, values) -> sorted.put(name, Arrays.asList(values)));
      what.append("form:").append(RequestFingerprints.ofJson(sorted));
    } else if (isJson(request) && bytes.length > 0) {
      what.append("json:").append(jsonFingerprint(json.get()));
    } else {
      what.append("bytes:").append(RequestFingerprints.ofBytes(bytes));
    }
    return RequestFingerprints.ofBytes(what.toString().getBytes(StandardCharsets.UTF_8));
  }

  private String jsonFingerprint(JsonCodecs json) {
    if (json != null) {
      try {
        return RequestFingerprints.ofJson(json.readTree(bytes));
      } catch (IOException | IllegalArgumentException notJson) {
        log.debug("A JSON body that does not parse is fingerprinted by its bytes", notJson);
      }
    }
    return RequestFingerprints.ofBytes(bytes);
  }

  private static boolean isForm(HttpServletRequest request) {
    String type = request.getContentType();
    return type != null
        && type.toLowerCase(Locale.ROOT).startsWith("application/x-www-form-urlencoded");
  }

  private static boolean isJson(HttpServletRequest request) {
    String type = request.getContentType();
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
