package dev.idempotency.spring.web;

import dev.idempotency.RequestFingerprints;
import dev.idempotency.spring.JsonCodecs;
import dev.idempotency.spring.JsonFingerprints;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.Part;
import java.io.IOException;
import java.io.InputStream;
import java.net.URLDecoder;
import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;
import java.security.DigestInputStream;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.http.MediaType;

/**
 * What makes two requests under one key the same request: the path and query, and the body. A JSON
 * body counts by its exact canonical form ({@link JsonFingerprints}), a form by its parameters
 * sorted by name, a multipart body by its parts (name, file name, content type and a digest of the
 * content; sorted by name, in order within a name), anything else by its bytes. Form and multipart
 * bodies are read as the container parsed them, so {@code getParameter} and {@code getParts} keep
 * working for the handler.
 */
final class RequestFingerprint {

  private static final Logger log = LoggerFactory.getLogger(IdempotentEndpointFilter.class);

  private RequestFingerprint() {}

  /** The body is larger than the limit; the request is refused with 413. */
  static final class BodyTooLarge extends Exception {
    private static final long serialVersionUID = 1L;

    BodyTooLarge() {
      super(null, null, false, false);
    }
  }

  /**
   * The fingerprint of a request.
   *
   * @param request the request as the handler gets it (multipart already parsed)
   * @param body the filter's wrapper of it, which can hold a body in memory
   * @param maxBodyBytes the largest body held in memory (JSON and other bytes)
   * @param json the application's JSON mapper, or null (JSON then counts by its bytes)
   */
  static String of(
      HttpServletRequest request,
      BodyCachingRequest body,
      long maxBodyBytes,
      @Nullable JsonCodecs json)
      throws IOException, ServletException, BodyTooLarge {
    StringBuilder what = new StringBuilder();
    what.append(request.getRequestURI())
        .append('?')
        .append(Objects.toString(request.getQueryString(), ""))
        .append('\n');
    String type = Objects.toString(request.getContentType(), "").toLowerCase(Locale.ROOT);
    if (type.startsWith("application/x-www-form-urlencoded")) {
      what.append("form:").append(form(request));
    } else if (type.startsWith("multipart/")) {
      what.append("multipart:").append(multipart(request));
    } else {
      byte[] bytes = body.readBody(maxBodyBytes);
      if (bytes == null) {
        throw new BodyTooLarge();
      }
      if (bytes.length > 0 && isJson(request.getContentType())) {
        what.append("json:").append(json(bytes, json));
      } else {
        what.append("bytes:").append(RequestFingerprints.ofBytes(bytes));
      }
    }
    return RequestFingerprints.ofBytes(what.toString().getBytes(StandardCharsets.UTF_8));
  }

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
    StringBuilder what = new StringBuilder();
    what.append(path).append('?').append(Objects.toString(query, "")).append('\n');
    MediaType form = formType(contentType);
    String parameters = form != null ? form(bytes, form) : null;
    if (parameters != null) {
      what.append("form:").append(parameters);
    } else if (bytes.length > 0 && isJson(contentType)) {
      what.append("json:").append(json(bytes, json));
    } else {
      what.append("bytes:").append(RequestFingerprints.ofBytes(bytes));
    }
    return RequestFingerprints.ofBytes(what.toString().getBytes(StandardCharsets.UTF_8));
  }

  /**
   * The fingerprint of a multipart request whose parts were described elsewhere (Spring WebFlux):
   * the path, the query and the parts, each as {@link #multipart} describes a part.
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

  /** The content type if it is a form's, else null. */
  private static @Nullable MediaType formType(@Nullable String type) {
    if (type == null) {
      return null;
    }
    try {
      MediaType media = MediaType.parseMediaType(type);
      return media.isCompatibleWith(MediaType.APPLICATION_FORM_URLENCODED) ? media : null;
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

  private static String form(HttpServletRequest request) {
    Map<String, Object> sorted = new TreeMap<>();
    request.getParameterMap().forEach((name, values) -> sorted.put(name, Arrays.asList(values)));
    return JsonFingerprints.of(sorted);
  }

  private static String multipart(HttpServletRequest request) throws IOException, ServletException {
    List<Part> parts = new ArrayList<>(request.getParts());
    parts.sort(Comparator.comparing(Part::getName)); // stable: in order within one name
    List<Object> described = new ArrayList<>(parts.size());
    for (Part part : parts) {
      Map<String, Object> one = new LinkedHashMap<>();
      one.put("name", part.getName());
      one.put("file", part.getSubmittedFileName());
      one.put("type", part.getContentType());
      one.put("content", digest(part));
      described.add(one);
    }
    return JsonFingerprints.of(described);
  }

  private static String digest(Part part) throws IOException {
    MessageDigest sha256;
    try {
      sha256 = MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 is required of every Java platform", e);
    }
    try (InputStream in = new DigestInputStream(part.getInputStream(), sha256)) {
      in.transferTo(java.io.OutputStream.nullOutputStream());
    }
    return HexFormat.of().formatHex(sha256.digest());
  }

  private static String json(byte[] bytes, @Nullable JsonCodecs json) {
    if (json != null) {
      try {
        return JsonFingerprints.of(json.readTree(bytes));
      } catch (IOException | IllegalArgumentException notJson) {
        log.debug("A JSON body that does not parse is fingerprinted by its bytes", notJson);
      }
    }
    return RequestFingerprints.ofBytes(bytes);
  }

  private static boolean isJson(@Nullable String type) {
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
