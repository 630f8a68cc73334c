package dev.idempotency.spring.web;

import jakarta.servlet.DispatcherType;
import jakarta.servlet.ServletOutputStream;
import jakarta.servlet.WriteListener;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.ByteArrayOutputStream;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import org.jspecify.annotations.Nullable;
import org.springframework.core.MethodParameter;
import org.springframework.core.ResolvableType;
import org.springframework.web.bind.annotation.ResponseStatus;
import org.springframework.web.context.WebApplicationContext;
import org.springframework.web.context.request.ServletWebRequest;
import org.springframework.web.method.HandlerMethod;
import org.springframework.web.method.support.HandlerMethodReturnValueHandler;
import org.springframework.web.method.support.HandlerMethodReturnValueHandlerComposite;
import org.springframework.web.method.support.ModelAndViewContainer;
import org.springframework.web.servlet.mvc.method.annotation.RequestMappingHandlerAdapter;
import org.springframework.web.servlet.support.RequestContextUtils;

/**
 * The response an async handler's result would have been, rendered after its request timed out and
 * ended: with Spring MVC's own return value handlers (message converters, content negotiation,
 * {@code ResponseEntity}), against a copy of the request taken while it was still valid (method,
 * URI, headers, attributes) and an in-memory response. What cannot be rendered so (a view) is
 * stored without a body: the send happened, so a repeat must not send again.
 */
final class LateResponse {

  private final HandlerMethod handler;
  private final @Nullable HandlerMethodReturnValueHandlerComposite handlers;
  private final Map<String, Object> request;
  private final long limit;

  private LateResponse(
      HandlerMethod handler,
      @Nullable HandlerMethodReturnValueHandlerComposite handlers,
      Map<String, Object> request,
      long limit) {
    this.handler = handler;
    this.handlers = handlers;
    this.request = request;
    this.limit = limit;
  }

  /** A copy of what rendering reads of {@code request}, taken while it is valid. */
  static LateResponse of(HttpServletRequest request, HandlerMethod handler, long limit) {
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
    return new LateResponse(handler, returnValueHandlers(request), copy, limit);
  }

  private static @Nullable HandlerMethodReturnValueHandlerComposite returnValueHandlers(
      HttpServletRequest request) {
    WebApplicationContext context = RequestContextUtils.findWebApplicationContext(request);
    RequestMappingHandlerAdapter adapter =
        context == null
            ? null
            : context.getBeanProvider(RequestMappingHandlerAdapter.class).getIfUnique();
    List<HandlerMethodReturnValueHandler> handlers =
        adapter == null ? null : adapter.getReturnValueHandlers();
    return handlers == null
        ? null
        : new HandlerMethodReturnValueHandlerComposite().addHandlers(handlers);
  }

  /**
   * The response for {@code value}, the async result, as it would have been written.
   *
   * @param listedHeaders the headers the endpoint lists to store
   */
  StoredResponse render(@Nullable Object value, List<String> listedHeaders) {
    InMemoryResponse response = new InMemoryResponse();
    HttpServletResponse servletResponse = response.proxy();
    ResponseStatus status = handler.getMethodAnnotation(ResponseStatus.class);
    if (status != null) {
      servletResponse.setStatus(status.code().value());
    }
    boolean rendered = false;
    if (handlers != null) {
      ServletWebRequest web = new ServletWebRequest(requestProxy(), servletResponse);
      ModelAndViewContainer model = new ModelAndViewContainer();
      try {
        handlers.handleReturnValue(value, new AsyncResultType(handler, value), model, web);
        rendered = model.isRequestHandled();
      } catch (Exception e) {
        rendered = false;
      }
    }
    try {
      servletResponse.flushBuffer();
    } catch (java.io.IOException e) {
      rendered = false;
    }
    byte[] body = response.body.toByteArray();
    StoredResponse stored =
        StoredResponse.capture(
            servletResponse, rendered && body.length <= limit ? body : null, listedHeaders);
    return rendered ? stored : stored.withoutBody();
  }

  @SuppressWarnings("unchecked")
  private HttpServletRequest requestProxy() {
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

  private static @Nullable Object objectMethodOrDefault(
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

  /** The async result's type, as Spring MVC's own concurrent-result parameter gives it. */
  private static final class AsyncResultType extends MethodParameter {
    private final Class<?> beanType;
    private final ResolvableType type;
    private final @Nullable Object value;

    AsyncResultType(HandlerMethod handler, @Nullable Object value) {
      super(handler.getMethod(), -1);
      this.beanType = handler.getBeanType();
      this.type = ResolvableType.forMethodReturnType(handler.getMethod()).getGeneric();
      this.value = value;
    }

    private AsyncResultType(AsyncResultType original) {
      super(original);
      this.beanType = original.beanType;
      this.type = original.type;
      this.value = original.value;
    }

    @Override
    public Class<?> getContainingClass() {
      return beanType;
    }

    @Override
    public Class<?> getParameterType() {
      if (value != null) {
        return value.getClass();
      }
      return ResolvableType.NONE.equals(type) ? super.getParameterType() : type.toClass();
    }

    @Override
    public java.lang.reflect.Type getGenericParameterType() {
      return type.getType();
    }

    @Override
    public AsyncResultType clone() {
      return new AsyncResultType(this);
    }
  }

  /** A response held in memory: status, headers, body. */
  private static final class InMemoryResponse {
    final ByteArrayOutputStream body = new ByteArrayOutputStream();
    final Map<String, List<String>> headers = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);
    int status = 200;
    @Nullable String contentType;
    String encoding = StandardCharsets.ISO_8859_1.name();
    @Nullable PrintWriter writer;

    HttpServletResponse proxy() {
      ServletOutputStream stream =
          new ServletOutputStream() {
            @Override
            public boolean isReady() {
              return true;
            }

            @Override
            public void setWriteListener(WriteListener listener) {}

            @Override
            public void write(int b) {
              body.write(b);
            }

            @Override
            public void write(byte[] bytes, int offset, int length) {
              body.write(bytes, offset, length);
            }
          };
      InvocationHandler answers =
          (proxy, method, args) -> {
            switch (method.getName()) {
              case "setStatus":
                status = (Integer) args[0];
                return null;
              case "getStatus":
                return status;
              case "sendError":
                status = (Integer) args[0];
                return null;
              case "sendRedirect":
                status = 302;
                headers.put("Location", new ArrayList<>(List.of((String) args[0])));
                return null;
              case "setHeader":
              case "setIntHeader":
              case "setDateHeader":
                set((String) args[0], String.valueOf(args[1]), true);
                return null;
              case "addHeader":
              case "addIntHeader":
              case "addDateHeader":
                set((String) args[0], String.valueOf(args[1]), false);
                return null;
              case "getHeader":
                List<String> values = headers.get((String) args[0]);
                return values == null || values.isEmpty() ? null : values.get(0);
              case "getHeaders":
                return new ArrayList<>(headers.getOrDefault((String) args[0], List.of()));
              case "getHeaderNames":
                return new ArrayList<>(headers.keySet());
              case "containsHeader":
                return headers.containsKey((String) args[0]);
              case "setContentType":
                contentType = (String) args[0];
                return null;
              case "getContentType":
                return contentType;
              case "setCharacterEncoding":
                encoding = args[0] == null ? StandardCharsets.ISO_8859_1.name() : (String) args[0];
                return null;
              case "getCharacterEncoding":
                return encoding;
              case "getOutputStream":
                return stream;
              case "getWriter":
                if (writer == null) {
                  writer = new PrintWriter(new OutputStreamWriter(body, Charset.forName(encoding)));
                }
                return writer;
              case "flushBuffer":
                if (writer != null) {
                  writer.flush();
                }
                return null;
              case "encodeURL":
              case "encodeRedirectURL":
                return args[0];
              case "getLocale":
                return Locale.getDefault();
              default:
                return objectMethodOrDefault(proxy, method, args);
            }
          };
      return (HttpServletResponse)
          Proxy.newProxyInstance(
              LateResponse.class.getClassLoader(),
              new Class<?>[] {HttpServletResponse.class},
              answers);
    }

    private void set(String name, String value, boolean replace) {
      if ("Content-Type".equalsIgnoreCase(name)) {
        contentType = value;
        return;
      }
      List<String> values = headers.computeIfAbsent(name, n -> new ArrayList<>());
      if (replace) {
        values.clear();
      }
      values.add(value);
    }
  }
}
