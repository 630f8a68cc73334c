package dev.idempotency.spring.web;

import jakarta.servlet.ServletOutputStream;
import jakarta.servlet.WriteListener;
import jakarta.servlet.http.HttpServletResponse;
import jakarta.servlet.http.HttpServletResponseWrapper;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.io.UnsupportedEncodingException;
import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;
import org.jspecify.annotations.Nullable;

/**
 * The response of a request the filter follows: a plain pass-through until {@link #startCapture()}
 * (the key was claimed), then the body is held back in memory, up to a bound, so that the filter
 * can store it before the client gets it. A body that outgrows the bound is sent on as it comes
 * ({@link #overflowed()}). {@code sendError} and {@code sendRedirect} go to the container as they
 * are (it renders the error page in an error dispatch); status and headers always live in the
 * wrapped response. Used by one request at a time, as servlet responses are.
 */
final class CapturingResponse extends HttpServletResponseWrapper {

  private final long limit;
  private boolean capturing;
  private @Nullable ByteArrayOutputStream buffer;
  private boolean overflowed;
  private boolean errorSent;
  private boolean redirected;
  private long declaredLength = -1;
  private @Nullable ServletOutputStream stream;
  private @Nullable PrintWriter writer;

  /**
   * @param response the response to wrap
   * @param limit the most body bytes held back
   */
  CapturingResponse(HttpServletResponse response, long limit) {
    super(response);
    this.limit = limit;
  }

  /** The most body bytes held back to store. */
  long limit() {
    return limit;
  }

  /** From now on, hold the body back. */
  void startCapture() {
    capturing = true;
    buffer = new ByteArrayOutputStream(1024);
  }

  boolean capturing() {
    return capturing;
  }

  /** Whether the body outgrew the bound and went to the client as it came. */
  boolean overflowed() {
    return overflowed;
  }

  /**
   * Whether the application called {@code sendError}: the container answers from its error page.
   */
  boolean errorSent() {
    return errorSent;
  }

  /** The body held back so far. */
  byte[] body() throws IOException {
    if (writer != null) {
      writer.flush();
    }
    return buffer == null ? new byte[0] : buffer.toByteArray();
  }

  /** Sends what was held back to the client and stops capturing. */
  void release() throws IOException {
    if (!capturing) {
      return;
    }
    byte[] body = body();
    capturing = false;
    buffer = null;
    if (overflowed || errorSent || redirected) {
      return;
    }
    HttpServletResponse response = (HttpServletResponse) getResponse();
    if (!response.isCommitted()) {
      response.setContentLengthLong(body.length);
    }
    if (body.length > 0) {
      response.getOutputStream().write(body);
    }
  }

  /** Drops what was held back and stops capturing: the container answers (an exception). */
  void discard() {
    capturing = false;
    buffer = null;
  }

  private void write(byte[] bytes, int offset, int length) throws IOException {
    if (overflowed || buffer == null) {
      super.getOutputStream().write(bytes, offset, length);
    } else {
      buffer.write(bytes, offset, length);
      overflowIfOverTheLimit();
    }
  }

  private void write(int b) throws IOException {
    if (overflowed || buffer == null) {
      super.getOutputStream().write(b);
    } else {
      buffer.write(b);
      overflowIfOverTheLimit();
    }
  }

  /** Past the limit, what was held back goes to the client, and the rest as it comes. */
  private void overflowIfOverTheLimit() throws IOException {
    if (buffer == null || buffer.size() <= limit) {
      return;
    }
    overflowed = true;
    byte[] held = buffer.toByteArray();
    buffer = null;
    if (declaredLength >= 0) {
      super.setContentLengthLong(declaredLength);
    }
    super.getOutputStream().write(held);
  }

  private void declareLength(String value) {
    try {
      declaredLength = Long.parseLong(value.strip());
    } catch (NumberFormatException e) {
      declaredLength = -1; // not a length: the body's own is set when it is sent
    }
  }

  @Override
  public ServletOutputStream getOutputStream() throws IOException {
    if (!capturing) {
      return super.getOutputStream();
    }
    if (stream == null) {
      stream = new CapturingStream();
    }
    return stream;
  }

  @Override
  public PrintWriter getWriter() throws IOException {
    if (!capturing) {
      return super.getWriter();
    }
    if (writer == null) {
      String encoding = getCharacterEncoding();
      Charset charset;
      try {
        charset = encoding != null ? Charset.forName(encoding) : StandardCharsets.ISO_8859_1;
      } catch (IllegalArgumentException e) {
        throw new UnsupportedEncodingException(encoding);
      }
      writer = new PrintWriter(new OutputStreamWriter(getOutputStream(), charset));
    }
    return writer;
  }

  @Override
  public void flushBuffer() throws IOException {
    if (!capturing || overflowed) {
      super.flushBuffer();
    } else if (writer != null) {
      writer.flush(); // into the buffer; nothing reaches the client yet
    }
  }

  @Override
  public void resetBuffer() {
    super.resetBuffer();
    if (capturing && buffer != null) {
      buffer.reset();
    }
  }

  @Override
  public void reset() {
    super.reset();
    if (capturing && buffer != null) {
      buffer.reset();
      declaredLength = -1;
    }
  }

  @Override
  public void setContentLength(int length) {
    setContentLengthLong(length);
  }

  @Override
  public void setContentLengthLong(long length) {
    if (capturing && !overflowed) {
      declaredLength = length; // set from the body held back, when it is sent
    } else {
      super.setContentLengthLong(length);
    }
  }

  @Override
  public void setHeader(String name, String value) {
    if (capturing && !overflowed && "Content-Length".equalsIgnoreCase(name)) {
      declareLength(value);
    } else {
      super.setHeader(name, value);
    }
  }

  @Override
  public void addHeader(String name, String value) {
    if (capturing && !overflowed && "Content-Length".equalsIgnoreCase(name)) {
      declareLength(value);
    } else {
      super.addHeader(name, value);
    }
  }

  @Override
  public void setIntHeader(String name, int value) {
    if (capturing && !overflowed && "Content-Length".equalsIgnoreCase(name)) {
      declaredLength = value;
    } else {
      super.setIntHeader(name, value);
    }
  }

  @Override
  public void sendError(int status) throws IOException {
    beforeContainerAnswers(true);
    super.sendError(status);
  }

  @Override
  public void sendError(int status, String message) throws IOException {
    beforeContainerAnswers(true);
    super.sendError(status, message);
  }

  @Override
  public void sendRedirect(String location) throws IOException {
    beforeContainerAnswers(false);
    super.sendRedirect(location);
  }

  private void beforeContainerAnswers(boolean error) {
    if (capturing && buffer != null) {
      buffer.reset();
    }
    if (error) {
      errorSent = true;
    } else {
      redirected = true;
    }
  }

  private final class CapturingStream extends ServletOutputStream {
    @Override
    public void write(int b) throws IOException {
      CapturingResponse.this.write(b);
    }

    @Override
    public void write(byte[] bytes, int offset, int length) throws IOException {
      CapturingResponse.this.write(bytes, offset, length);
    }

    @Override
    public void flush() throws IOException {
      if (overflowed) {
        CapturingResponse.super.getOutputStream().flush();
      }
    }

    @Override
    public boolean isReady() {
      return true;
    }

    @Override
    public void setWriteListener(WriteListener listener) {
      throw new UnsupportedOperationException(
          "an @IdempotentEndpoint response is written blocking while it is captured");
    }
  }
}
