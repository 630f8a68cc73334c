package dev.idempotency.spring.web;

import jakarta.servlet.ServletConnection;
import jakarta.servlet.http.Cookie;
import jakarta.servlet.http.HttpServletMapping;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.MappingMatch;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * Copies of the parts of a request that its container may recycle, or a reader may change, once the
 * request has ended: its servlet mapping, its connection, its cookies and its parameters. An {@link
 * EndedRequest} answers from them.
 */
final class CopiedRequestParts {

  private CopiedRequestParts() {}

  /**
   * The servlet mapping the request matched, copied (a container may recycle its own): work that
   * builds a link from it after the request ended gets what it would have got on time, not null.
   */
  record Mapping(
      String matchValue, String pattern, String servletName, @Nullable MappingMatch match)
      implements HttpServletMapping {

    static @Nullable Mapping of(@Nullable HttpServletMapping mapping) {
      return mapping == null
          ? null
          : new Mapping(
              mapping.getMatchValue(),
              mapping.getPattern(),
              mapping.getServletName(),
              mapping.getMappingMatch());
    }

    @Override
    public String getMatchValue() {
      return matchValue;
    }

    @Override
    public String getPattern() {
      return pattern;
    }

    @Override
    public String getServletName() {
      return servletName;
    }

    @Override
    public @Nullable MappingMatch getMappingMatch() {
      return match;
    }
  }

  /** The connection the request came on, copied (a container may recycle its own). */
  record Connection(
      String connectionId, String protocol, String protocolConnectionId, boolean secure)
      implements ServletConnection {

    static @Nullable Connection of(@Nullable ServletConnection connection) {
      return connection == null
          ? null
          : new Connection(
              connection.getConnectionId(),
              connection.getProtocol(),
              connection.getProtocolConnectionId(),
              connection.isSecure());
    }

    @Override
    public String getConnectionId() {
      return connectionId;
    }

    @Override
    public String getProtocol() {
      return protocol;
    }

    @Override
    public String getProtocolConnectionId() {
      return protocolConnectionId;
    }

    @Override
    public boolean isSecure() {
      return secure;
    }
  }

  /** The request's cookies, each a copy (a {@code Cookie} can be changed), or {@code null}. */
  static Cookie @Nullable [] cookies(HttpServletRequest request) {
    Cookie[] cookies = request.getCookies();
    return cookies == null ? null : copies(cookies);
  }

  /** A copy of each of {@code cookies}. */
  static Cookie[] copies(Cookie[] cookies) {
    Cookie[] copies = new Cookie[cookies.length];
    for (int i = 0; i < cookies.length; i++) {
      copies[i] = (Cookie) cookies[i].clone();
    }
    return copies;
  }

  /**
   * The request's parameters (its query string's, and a form body's the container parsed), which an
   * application's exception resolver or {@code @ExceptionHandler} may read; none if the request can
   * no longer give them.
   */
  static Map<String, String[]> parameters(HttpServletRequest request) {
    Map<String, String[]> parameters = new LinkedHashMap<>();
    try {
      request.getParameterMap().forEach((name, values) -> parameters.put(name, values.clone()));
    } catch (RuntimeException e) {
      // a malformed query string or a form body that cannot be read: as if it had no parameters
      parameters.clear();
    }
    return Collections.unmodifiableMap(parameters);
  }
}
