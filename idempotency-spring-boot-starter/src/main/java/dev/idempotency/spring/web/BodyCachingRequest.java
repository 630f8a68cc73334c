package dev.idempotency.spring.web;

import jakarta.servlet.MultipartConfigElement;
import jakarta.servlet.ReadListener;
import jakarta.servlet.ServletContext;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletInputStream;
import jakarta.servlet.ServletRequestWrapper;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletRequestWrapper;
import jakarta.servlet.http.Part;
import java.io.BufferedReader;
import java.io.ByteArrayInputStream;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import org.jspecify.annotations.Nullable;
import org.slf4j.LoggerFactory;
import org.springframework.web.context.WebApplicationContext;
import org.springframework.web.servlet.support.RequestContextUtils;

/**
 * The request of a request the filter follows: a plain pass-through until {@link #readBody} (an
 * {@link IdempotentEndpoint} handler's request is fingerprinted), then its body is read again from
 * memory by the handler. Form and multipart bodies are never read here: the container parses them
 * (for {@code getParameter} and {@code getParts}) from its own stream; the parts it hands out wrap
 * the container's ({@link UploadedPart}). Used by one request at a time; once the container ends a
 * request whose handler's work goes on ({@link #outlivedByItsWork}), the container's request below
 * it is replaced by a copy, and its parts read copies of their content.
 */
final class BodyCachingRequest extends HttpServletRequestWrapper {

  private byte @Nullable [] body;
  private volatile @Nullable List<UploadedPart> parts; // the container's, wrapped: once parsed

  BodyCachingRequest(HttpServletRequest request) {
    super(request);
  }

  /**
   * Reads the body into memory, for the fingerprint and then the handler.
   *
   * @param maxBytes the most bytes read
   * @return the body, or {@code null} if it is larger than {@code maxBytes} (then the request is
   *     refused, the rest unread)
   */
  byte @Nullable [] readBody(long maxBytes) throws IOException {
    if (body != null) {
      return body;
    }
    if (super.getContentLengthLong() > maxBytes) {
      return null;
    }
    byte[] read =
        super.getInputStream().readNBytes((int) Math.min(Integer.MAX_VALUE - 8L, maxBytes + 1));
    if (read.length > maxBytes) {
      return null;
    }
    body = read;
    return read;
  }

  /**
   * The container is about to end the request (and may recycle it: Tomcat's recycled request throws
   * {@code IllegalStateException} on every read, and a reused one would answer for another request)
   * while the handler's async work goes on, detached from it at a timeout or a shutdown, or taken
   * over by the starter. That work may read its request as it may on time: its {@code
   * HttpServletRequest} parameter, or the one {@code RequestContextHolder} gives, which are this
   * wrapper (or wrap it). So from now on the container's request, at the bottom of the chain of
   * wrappers, is replaced by a copy of it taken now, while it is still valid ({@link EndedRequest}:
   * method, URI, headers, attributes, parameters, the principal, the session while it is valid; the
   * body as it was read here, else none): a read after the client was answered neither fails (a
   * failure nothing maps would release the key of work that may have sent, and the retry would send
   * again) nor reaches a request the container reused. The application's own wrappers below this
   * one (an authentication filter's, which answers {@code isUserInRole} from the token it parsed)
   * stay in the chain and answer as on time, and the work still finds them ({@code
   * WebUtils.getNativeRequest}). Called on the container's thread, before it recycles the request,
   * through the standard {@code ServletRequestWrapper.setRequest}.
   */
  void outlivedByItsWork() {
    ServletRequestWrapper innermost = this;
    while (innermost.getRequest() instanceof ServletRequestWrapper inner) {
      innermost = inner;
    }
    if (innermost.getRequest() instanceof HttpServletRequest request) {
      copyParts(request);
      innermost.setRequest(EndedRequest.copyOf(request).proxy());
    }
  }

  /**
   * The parts handed out (an uploaded file that Spring MVC resolved for a {@code MultipartFile}
   * parameter among them), which the container deletes when it recycles the request: each one's
   * content is copied to a file of its own, read from then on ({@link
   * UploadedPart#copyForTheWork}), if they are within the request's multipart limits (the
   * application's {@code MultipartConfigElement}: {@code spring.servlet.multipart.max-file-size}
   * and {@code max-request-size}), as the container accepted them; else, or if a copy fails, a part
   * reads the container's, gone once it recycled the request. Deleted once the call's outcome is
   * known ({@link #deleteCopies}).
   */
  private void copyParts(HttpServletRequest request) {
    List<UploadedPart> handedOut = parts;
    if (handedOut == null || handedOut.isEmpty() || !withinLimits(request, handedOut)) {
      return;
    }
    Object tempDir = request.getServletContext().getAttribute(ServletContext.TEMPDIR);
    File location = tempDir instanceof File dir ? dir : null;
    for (UploadedPart part : handedOut) {
      try {
        part.copyForTheWork(location);
      } catch (IOException | RuntimeException e) {
        LoggerFactory.getLogger(EndpointCall.class)
            .debug("A part of an idempotent endpoint's ended request could not be copied", e);
      }
    }
  }

  /** Whether the parts are within the application's multipart limits, if it has any. */
  private static boolean withinLimits(HttpServletRequest request, List<UploadedPart> parts) {
    WebApplicationContext context = RequestContextUtils.findWebApplicationContext(request);
    MultipartConfigElement limits =
        context == null
            ? null
            : context.getBeanProvider(MultipartConfigElement.class).getIfUnique();
    if (limits == null) {
      return true; // the container's own limits: what it parsed, it accepted
    }
    long total = 0;
    for (UploadedPart part : parts) {
      long size = part.containerSize();
      if (limits.getMaxFileSize() >= 0 && size > limits.getMaxFileSize()) {
        return false;
      }
      total += size;
    }
    return limits.getMaxRequestSize() < 0 || total <= limits.getMaxRequestSize();
  }

  /** Deletes the parts' copies ({@link #copyParts}), if any: the work that read them ended. */
  void deleteCopies() {
    List<UploadedPart> handedOut = parts;
    if (handedOut == null) {
      return;
    }
    for (UploadedPart part : handedOut) {
      try {
        part.deleteCopy();
      } catch (IOException e) {
        LoggerFactory.getLogger(EndpointCall.class)
            .debug("A copy of an ended request's part could not be deleted", e);
      }
    }
  }

  /**
   * The container's parts, each wrapped ({@link UploadedPart}: the same ones on every call), so
   * that they can be copied if the request ends under work that goes on; a new list each time, as
   * the parts themselves are the same.
   */
  @Override
  public @Nullable Collection<Part> getParts() throws IOException, ServletException {
    List<UploadedPart> handedOut = parts;
    if (handedOut == null) {
      synchronized (this) {
        handedOut = parts;
        if (handedOut == null) {
          Collection<Part> container = super.getParts();
          if (container == null) {
            return null; // the ended request's copy: it has none
          }
          List<UploadedPart> wrapped = new ArrayList<>(container.size());
          for (Part part : container) {
            wrapped.add(new UploadedPart(part));
          }
          handedOut = List.copyOf(wrapped);
          parts = handedOut;
        }
      }
    }
    return new ArrayList<>(handedOut);
  }

  /** The first of {@link #getParts} by that name, as the container answers. */
  @Override
  public @Nullable Part getPart(String name) throws IOException, ServletException {
    Collection<Part> all = getParts();
    if (all == null) {
      return super.getPart(name);
    }
    for (Part part : all) {
      if (name.equals(part.getName())) {
        return part;
      }
    }
    return null;
  }

  @Override
  public ServletInputStream getInputStream() throws IOException {
    byte[] body = this.body;
    if (body == null) {
      return super.getInputStream();
    }
    ByteArrayInputStream in = new ByteArrayInputStream(body);
    return new ServletInputStream() {
      @Override
      public int read() {
        return in.read();
      }

      @Override
      public int read(byte[] buffer, int offset, int length) {
        return in.read(buffer, offset, length);
      }

      @Override
      public boolean isFinished() {
        return in.available() == 0;
      }

      @Override
      public boolean isReady() {
        return true;
      }

      @Override
      public void setReadListener(ReadListener listener) {
        throw new UnsupportedOperationException("the body was read already; read it blocking");
      }
    };
  }

  @Override
  public BufferedReader getReader() throws IOException {
    if (body == null) {
      return super.getReader();
    }
    String encoding = getCharacterEncoding();
    Charset charset = encoding != null ? Charset.forName(encoding) : StandardCharsets.UTF_8;
    return new BufferedReader(new InputStreamReader(getInputStream(), charset));
  }

  @Override
  public int getContentLength() {
    return body == null ? super.getContentLength() : body.length;
  }

  @Override
  public long getContentLengthLong() {
    return body == null ? super.getContentLengthLong() : body.length;
  }
}
