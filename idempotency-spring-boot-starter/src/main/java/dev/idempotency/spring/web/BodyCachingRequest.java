package dev.idempotency.spring.web;

import jakarta.servlet.ReadListener;
import jakarta.servlet.ServletInputStream;
import jakarta.servlet.ServletRequestWrapper;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletRequestWrapper;
import java.io.BufferedReader;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;
import org.jspecify.annotations.Nullable;

/**
 * The request of a request the filter follows: a plain pass-through until {@link #readBody} (an
 * {@link IdempotentEndpoint} handler's request is fingerprinted), then its body is read again from
 * memory by the handler. Form and multipart bodies are never read here: the container parses them
 * (for {@code getParameter} and {@code getParts}) from its own stream. Used by one request at a
 * time; once the container ends a request whose handler's work goes on ({@link
 * #outlivedByItsWork}), the container's request below it is replaced by a copy.
 */
final class BodyCachingRequest extends HttpServletRequestWrapper {

  private byte @Nullable [] body;

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
      innermost.setRequest(EndedRequest.copyOf(request).proxy());
    }
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
