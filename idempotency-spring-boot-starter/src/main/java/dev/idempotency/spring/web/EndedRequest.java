package dev.idempotency.spring.web;

import jakarta.servlet.DispatcherType;
import jakarta.servlet.RequestDispatcher;
import jakarta.servlet.ServletContext;
import jakarta.servlet.http.Cookie;
import jakarta.servlet.http.HttpServletRequest;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;
import org.springframework.http.HttpHeaders;
import org.springframework.web.util.UriUtils;

/**
 * What rendering and exception resolvers read of a request (method, URI, headers, cookies,
 * attributes, parameters, the client's address, the principal, the session, the servlet context,
 * the servlet mapping, the connection and the request's ids, its locales), and work that outlived
 * its request may read of it, copied while the request was still valid, and answered after it ended
 * by a {@link HttpServletRequest} proxy whose body is gone. Its dispatchers are the servlet
 * context's, which outlives its requests. Its session, if it had one, is the same while it is
 * valid; once invalidated, or if it had none, {@code getSession(false)} answers null and {@code
 * getSession()} a fresh detached session that no container knows (a late answer creates no session
 * the client could use).
 */
final class EndedRequest {

  /** The request attribute Tomcat's {@code RequestDispatcher.forward} reads the type from. */
  private static final String TOMCAT_DISPATCHER_TYPE = "org.apache.catalina.core.DISPATCHER_TYPE";

  private final Map<String, Object> request;
  private final EndedSession session;

  private EndedRequest(Map<String, Object> request, EndedSession session) {
    this.request = request;
    this.session = session;
  }

  /** A copy of what rendering reads of {@code request}, taken while it is valid. */
  static EndedRequest copyOf(HttpServletRequest request) {
    Map<String, Object> copy = new HashMap<>();
    copy.put("getMethod", request.getMethod());
    copy.put("getRequestURI", request.getRequestURI());
    copy.put("getQueryString", request.getQueryString());
    copy.put("getContextPath", request.getContextPath());
    copy.put("getServletPath", request.getServletPath());
    copy.put("getPathInfo", request.getPathInfo());
    copy.put("getScheme", request.getScheme());
    copy.put("getServerName", request.getServerName());
    copy.put("getServerPort", request.getServerPort());
    copy.put("isSecure", request.isSecure());
    copy.put("getContentType", request.getContentType());
    copy.put("getCharacterEncoding", request.getCharacterEncoding());
    copy.put("getLocale", request.getLocale());
    copy.put("locales", List.copyOf(Collections.list(request.getLocales())));
    copy.put("getRequestURL", request.getRequestURL().toString());
    copy.put("getProtocol", request.getProtocol());
    copy.put("getRemoteAddr", request.getRemoteAddr());
    copy.put("getRemoteHost", request.getRemoteHost());
    copy.put("getRemotePort", request.getRemotePort());
    copy.put("getLocalAddr", request.getLocalAddr());
    copy.put("getLocalName", request.getLocalName());
    copy.put("getLocalPort", request.getLocalPort());
    copy.put("getAuthType", request.getAuthType());
    copy.put("getRemoteUser", request.getRemoteUser());
    copy.put("getUserPrincipal", request.getUserPrincipal());
    copy.put("getRequestedSessionId", request.getRequestedSessionId());
    copy.put("isRequestedSessionIdValid", request.isRequestedSessionIdValid());
    copy.put("isRequestedSessionIdFromCookie", request.isRequestedSessionIdFromCookie());
    copy.put("isRequestedSessionIdFromURL", request.isRequestedSessionIdFromURL());
    // Servlet 6.0 reads: null, as before they were copied, where a request cannot answer them
    copy.put("getRequestId", orNull(request::getRequestId));
    copy.put("getProtocolRequestId", orNull(request::getProtocolRequestId));
    copy.put(
        "getHttpServletMapping",
        orNull(() -> CopiedRequestParts.Mapping.of(request.getHttpServletMapping())));
    copy.put(
        "getServletConnection",
        orNull(() -> CopiedRequestParts.Connection.of(request.getServletConnection())));
    copy.put("cookies", CopiedRequestParts.cookies(request));
    copy.put("getServletContext", request.getServletContext()); // it outlives its requests
    // a session outlives its request (until it is invalidated): answered while it is valid
    EndedSession session = new EndedSession(request.getSession(false));
    Map<String, List<String>> headers = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);
    for (String name : Collections.list(request.getHeaderNames())) {
      headers.put(name, Collections.list(request.getHeaders(name)));
    }
    copy.put("headers", headers);
    Map<String, Object> attributes = new LinkedHashMap<>();
    for (String name : Collections.list(request.getAttributeNames())) {
      Object value = request.getAttribute(name);
      if (value != null) {
        attributes.put(name, value);
      }
    }
    // Tomcat's dispatcher type, which it answers but does not list: without it, its dispatcher's
    // forward from the copy invokes nothing. The copy's own type is REQUEST (getDispatcherType).
    if (request.getAttribute(TOMCAT_DISPATCHER_TYPE) != null) {
      attributes.put(TOMCAT_DISPATCHER_TYPE, DispatcherType.REQUEST);
    }
    copy.put("attributes", Collections.synchronizedMap(attributes));
    copy.put("parameters", CopiedRequestParts.parameters(request));
    return new EndedRequest(copy, session);
  }

  /**
   * What {@code read} answers, or null if it fails: a request (not a wrapper) built against an
   * older Servlet API lacks the method.
   */
  private static @Nullable Object orNull(Supplier<@Nullable Object> read) {
    try {
      return read.get();
    } catch (RuntimeException | LinkageError e) {
      return null;
    }
  }

  /** A request that answers from the copy; its attributes may be set and removed. */
  @SuppressWarnings("unchecked")
  HttpServletRequest proxy() {
    Map<String, List<String>> headers = (Map<String, List<String>>) request.get("headers");
    Map<String, Object> attributes = (Map<String, Object>) request.get("attributes");
    Map<String, String[]> parameters = (Map<String, String[]>) request.get("parameters");
    InvocationHandler answers =
        (proxy, method, args) -> {
          String name = method.getName();
          switch (name) {
            case "getHeader":
              List<String> values = headers.get((String) args[0]);
              return values == null || values.isEmpty() ? null : values.get(0);
            case "getHeaders":
              return Collections.enumeration(headers.getOrDefault((String) args[0], List.of()));
            case "getHeaderNames":
              return Collections.enumeration(new ArrayList<>(headers.keySet()));
            case "getIntHeader":
              List<String> ints = headers.get((String) args[0]);
              return ints == null || ints.isEmpty() ? -1 : Integer.parseInt(ints.get(0));
            case "getDateHeader":
              List<String> dates = headers.get((String) args[0]);
              if (dates == null || dates.isEmpty()) {
                return -1L;
              }
              // the three HTTP date formats, as the container parses them (IllegalArgumentException
              // for a value that is none of them, as the Servlet API says)
              HttpHeaders date = new HttpHeaders();
              date.set(HttpHeaders.DATE, dates.get(0));
              return date.getFirstDate(HttpHeaders.DATE);
            case "getCookies":
              Cookie[] cookies = (Cookie[]) request.get("cookies");
              return cookies == null ? null : CopiedRequestParts.copies(cookies);
            case "getAttribute":
              return attributes.get((String) args[0]);
            case "setAttribute":
              if (args[1] == null) {
                attributes.remove((String) args[0]);
              } else {
                attributes.put((String) args[0], args[1]);
              }
              return null;
            case "removeAttribute":
              attributes.remove((String) args[0]);
              return null;
            case "getAttributeNames":
              return Collections.enumeration(new ArrayList<>(attributes.keySet()));
            case "getRequestURL":
              return new StringBuffer((String) request.get("getRequestURL"));
            case "getLocales":
              return Collections.enumeration((List<Locale>) request.get("locales"));
            case "getRequestDispatcher":
              return dispatcher((String) args[0], attributes);
            case "getDispatcherType":
              return DispatcherType.REQUEST;
            case "getSession":
              boolean create = args == null || args.length == 0 || (Boolean) args[0];
              return session.session(create);
            case "getParameter":
              String[] given = parameters.get((String) args[0]);
              return given == null || given.length == 0 ? null : given[0];
            case "getParameterValues":
              String[] all = parameters.get((String) args[0]);
              return all == null ? null : all.clone();
            case "getParameterMap":
              return parameters;
            case "getParameterNames":
              return Collections.enumeration(new ArrayList<>(parameters.keySet()));
            case "getContentLength":
              return -1;
            case "getContentLengthLong":
              return -1L;
            case "getInputStream":
            case "getReader":
              throw new IllegalStateException("the request ended; its body is gone");
            default:
              if (request.containsKey(name) && method.getParameterCount() == 0) {
                return request.get(name);
              }
              return objectMethodOrDefault(proxy, method, args);
          }
        };
    return (HttpServletRequest)
        Proxy.newProxyInstance(
            LateResponse.class.getClassLoader(),
            new Class<?>[] {HttpServletRequest.class},
            answers);
  }

  /**
   * A dispatcher for {@code path}, as the container's request would have given on time: from the
   * servlet context, which outlives its requests (work that forwards to or includes another servlet
   * after its request ended would otherwise fail after it sent, its key released, and the retry
   * would send again: SPEC 1). A path relative to the request is resolved as Tomcat resolves it,
   * against the servlet path (the included one, in an include) and the path info, encoded as its
   * default {@code dispatchersUseEncodedPaths} encodes them.
   */
  private @Nullable RequestDispatcher dispatcher(
      @Nullable String path, Map<String, Object> attributes) {
    if (path == null || !(request.get("getServletContext") instanceof ServletContext context)) {
      return null;
    }
    int fragment = path.indexOf('#');
    String target = fragment < 0 ? path : path.substring(0, fragment);
    if (target.startsWith("/")) {
      return context.getRequestDispatcher(target);
    }
    String servletPath =
        attributes.get(RequestDispatcher.INCLUDE_SERVLET_PATH) instanceof String included
            ? included
            : (String) request.get("getServletPath");
    String pathInfo = (String) request.get("getPathInfo");
    String requestPath =
        (servletPath == null ? "" : servletPath) + (pathInfo == null ? "" : pathInfo);
    int slash = requestPath.lastIndexOf('/');
    String base = slash >= 0 ? requestPath.substring(0, slash + 1) : requestPath;
    return context.getRequestDispatcher(UriUtils.encodePath(base, StandardCharsets.UTF_8) + target);
  }

  /** What a proxy answers for an {@code Object} method or one it does not know: a default. */
  static @Nullable Object objectMethodOrDefault(
      Object proxy, Method method, Object @Nullable [] args) {
    switch (method.getName()) {
      case "equals":
        return args != null && proxy == args[0];
      case "hashCode":
        return System.identityHashCode(proxy);
      case "toString":
        return "a request that ended (" + LateResponse.class.getSimpleName() + ")";
      default:
        break;
    }
    Class<?> type = method.getReturnType();
    if (type == boolean.class) {
      return false;
    } else if (type == int.class) {
      return 0;
    } else if (type == long.class) {
      return 0L;
    } else if (type.isPrimitive()) {
      return null; // void
    }
    return null;
  }
}
