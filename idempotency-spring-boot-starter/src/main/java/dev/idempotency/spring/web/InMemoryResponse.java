package dev.idempotency.spring.web;

import jakarta.servlet.ServletOutputStream;
import jakarta.servlet.WriteListener;
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
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import org.jspecify.annotations.Nullable;

/**
 * A response held in memory: status, headers, body; what {@link LateResponse} renders into, and
 * what work that outlived its request writes to ({@link #workResponse}). Thread-safe: the work's
 * thread may write while another copies it.
 */
final class InMemoryResponse {
  final ByteArrayOutputStream body = new ByteArrayOutputStream();
  final Map<String, List<String>> headers = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);
  int status = 200;
  @Nullable String contentType;
  String encoding = StandardCharsets.ISO_8859_1.name();
  @Nullable PrintWriter writer;
  private boolean errorSent;
  private boolean bodyDropped; // the work's response: its body is not the answer, never kept

  /** Empty: status 200, no headers. */
  InMemoryResponse() {}

  /** A response that starts as {@code response} is now: status, Content-Type, headers; no body. */
  static InMemoryResponse copyOf(HttpServletResponse response) {
    InMemoryResponse copy = new InMemoryResponse();
    copy.status = response.getStatus();
    copy.contentType = response.getContentType();
    String encoding = response.getCharacterEncoding();
    if (encoding != null) {
      copy.encoding = encoding;
    }
    for (String name : response.getHeaderNames()) {
      if (!"Content-Type".equalsIgnoreCase(name)
          && !"Content-Length".equalsIgnoreCase(name) // the late body's, not this one's
          && !copy.headers.containsKey(name)) {
        copy.headers.put(name, new ArrayList<>(response.getHeaders(name)));
      }
    }
    return copy;
  }

  /** A fresh response with this one's status, Content-Type and headers; no body. */
  synchronized InMemoryResponse copy() {
    InMemoryResponse copy = new InMemoryResponse();
    copy.status = status;
    copy.contentType = contentType;
    copy.encoding = encoding;
    headers.forEach((name, values) -> copy.headers.put(name, new ArrayList<>(values)));
    return copy;
  }

  /** Whether {@code sendError} was called: an error page would have written the body. */
  boolean errorSent() {
    return errorSent;
  }

  /** The error sent is answered here after all: the response is written as any other. */
  void errorHandled() {
    errorSent = false;
  }

  /**
   * This response, for work that outlived its request to write to as it would to the request's
   * response on time: its status and headers are kept here (what a later {@link #copy} starts
   * from), a body written to it is dropped (the work's answer is its result; an unbounded body is
   * never held), and it is never committed. {@code addCookie} keeps nothing: a cookie is never
   * stored.
   */
  synchronized HttpServletResponse workResponse() {
    bodyDropped = true;
    return proxy();
  }

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
            synchronized (InMemoryResponse.this) {
              if (!bodyDropped) {
                body.write(b);
              }
            }
          }

          @Override
          public void write(byte[] bytes, int offset, int length) {
            synchronized (InMemoryResponse.this) {
              if (!bodyDropped) {
                body.write(bytes, offset, length);
              }
            }
          }
        };
    InvocationHandler answers =
        (proxy, method, args) -> {
          synchronized (InMemoryResponse.this) {
            return answer(proxy, method, args, stream);
          }
        };
    return (HttpServletResponse)
        Proxy.newProxyInstance(
            LateResponse.class.getClassLoader(),
            new Class<?>[] {HttpServletResponse.class},
            answers);
  }

  private @Nullable Object answer(
      Object proxy, Method method, Object @Nullable [] args, ServletOutputStream stream) {
    switch (method.getName()) {
      case "setStatus":
        status = (Integer) args[0];
        return null;
      case "getStatus":
        return status;
      case "sendError":
        status = (Integer) args[0];
        errorSent = true;
        return null;
      case "sendRedirect":
        status = 302;
        headers.put("Location", new ArrayList<>(List.of((String) args[0])));
        return null;
      case "setHeader":
      case "setIntHeader":
      case "setDateHeader":
        set((String) args[0], args[1] == null ? null : String.valueOf(args[1]), true);
        return null;
      case "addHeader":
      case "addIntHeader":
      case "addDateHeader":
        set((String) args[0], args[1] == null ? null : String.valueOf(args[1]), false);
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
          writer = new PrintWriter(new OutputStreamWriter(stream, Charset.forName(encoding)));
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
        return EndedRequest.objectMethodOrDefault(proxy, method, args);
    }
  }

  /**
   * A header set ({@code replace}) or added, as a servlet container does: a null value set removes
   * the header (Servlet 6.1; Spring 7's {@code ServletServerHttpResponse} replaces a header so,
   * before it adds the entity's values: kept as {@code "null"}, it was the first value stored), and
   * a null value added is ignored.
   */
  private void set(String name, @Nullable String value, boolean replace) {
    if ("Content-Type".equalsIgnoreCase(name)) {
      contentType = value;
      return;
    }
    if (value == null) {
      if (replace) {
        headers.remove(name);
      }
      return;
    }
    List<String> values = headers.computeIfAbsent(name, n -> new ArrayList<>());
    if (replace) {
      values.clear();
    }
    values.add(value);
  }
}
