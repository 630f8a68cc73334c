package dev.idempotency.spring.web;

import dev.idempotency.RequestFingerprints;
import dev.idempotency.spring.JsonCodecs;
import dev.idempotency.spring.JsonFingerprints;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.Part;
import java.io.IOException;
import java.io.InputStream;
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

/**
 * What makes two requests under one key the same request: the path and query, and the body. A JSON
 * body counts by its exact canonical form ({@link JsonFingerprints}), a form by its parameters
 * sorted by name, a multipart body by its parts (name, file name, content type and a digest of the
 * content; sorted by name, in order within a name), anything else by its bytes. Form and multipart
 * bodies are read as the container parsed them, so {@code getParameter} and {@code getParts} keep
 * working for the handler. The servlet side: the body alone is {@link BodyFingerprint}'s, which the
 * WebFlux filter uses without the servlet API on the class path.
 */
final class RequestFingerprint {

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
    // sized for the path, a 64-digit digest and the prefixes: one array, not three growths
    StringBuilder what = new StringBuilder(request.getRequestURI().length() + 96);
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
      if (bytes.length > 0 && BodyFingerprint.isJson(request.getContentType())) {
        what.append("json:").append(BodyFingerprint.json(bytes, json));
      } else {
        what.append("bytes:").append(RequestFingerprints.ofBytes(bytes));
      }
    }
    return RequestFingerprints.ofBytes(what.toString().getBytes(StandardCharsets.UTF_8));
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
}
