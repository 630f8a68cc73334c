package dev.idempotency.spring.web;

import jakarta.servlet.DispatcherType;
import jakarta.servlet.http.HttpServletRequest;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import org.jspecify.annotations.Nullable;

/**
 * What rendering reads of a request (method, URI, headers, attributes), copied while the request
 * was still valid, and answered after it ended by a {@link HttpServletRequest} proxy whose body is
 * gone.
 */
final class EndedRequest {

  private final Map<String, Object> request;

  private EndedRequest(Map<String, Object> request) {
    this.request = request;
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
    copy.put("getRequestURL", request.getRequestURL().toString());
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
    copy.put("attributes", Collections.synchronizedMap(attributes));
    return new EndedRequest(copy);
  }

  /** A request that answers from the copy; its attributes may be set and removed. */
  @SuppressWarnings("unchecked")
  HttpServletRequest proxy() {
    Map<String, List<String>> headers = (Map<String, List<String>>) request.get("headers");
    Map<String, Object> attributes = (Map<String, Object>) request.get("attributes");
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
              return -1L;
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
              return Collections.enumeration(List.of((Locale) request.get("getLocale")));
            case "getDispatcherType":
              return DispatcherType.REQUEST;
            case "getParameterMap":
              return Map.of();
            case "getParameterNames":
              return Collections.emptyEnumeration();
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
