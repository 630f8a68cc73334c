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
 * ({@link #overflowed()}). A stream is not held at all ({@link #streamed()}): decided at the first
 * write or flush, by a {@code Content-Type} of {@code text/event-stream} or {@code
 * application/x-ndjson}, or because the handler returned one ({@link #streamingResult()}), each
 * write and flush goes to the client as it comes while a copy is kept up to the bound; past it the
 * copy is dropped and {@code onStreamPastBound} is told. A write or flush the container refuses
 * (the client went away) marks the response {@link #cutShort()}. {@code sendError} and {@code
 * sendRedirect} go to the container as they are (it renders the error page in an error dispatch);
 * status and headers always live in the wrapped response: the container's, until the container ends
 * a request whose work goes on without it ({@link #outlivedByItsWork}). Used by one request at a
 * time, as servlet responses are; a stream's writes may come from the application's thread.
 */
final class CapturingResponse extends HttpServletResponseWrapper {

  private final long limit;
  private boolean capturing;
  private @Nullable ByteArrayOutputStream buffer;
  private volatile boolean overflowed;
  private boolean decided;
  private boolean streamingResult;
  private volatile boolean streamed;
  private volatile boolean cutShort;
  private volatile boolean wrote;
  private @Nullable Runnable onStreamPastBound;
  private @Nullable Runnable onRefused;
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

  /**
   * The container is about to end the request (and may recycle its response: Tomcat's recycled
   * response throws {@code IllegalStateException} on every call) while the handler's work goes on,
   * detached at a timeout or a shutdown, or taken over by the starter. That work may set a header
   * or a status on its {@code HttpServletResponse} parameter as it may on time (a receipt id),
   * which is this wrapper (or wraps it): from now on this wrapper reaches {@code workResponse}
   * instead, where its result is rendered from ({@link LateResponse#workResponse}), so such a call
   * neither fails (a failure would release the key of work that may have sent, and the retry would
   * send again) nor reaches a response the container reused. Called on the container's thread,
   * before it recycles the response, through the standard {@code
   * ServletResponseWrapper.setResponse}.
   *
   * @param workResponse the response the work's result is rendered from
   */
  void outlivedByItsWork(HttpServletResponse workResponse) {
    setResponse(workResponse);
  }

  /** The most body bytes held back to store. */
  long limit() {
    return limit;
  }

  /** From now on, hold the body back. */
  void startCapture() {
    startCapture(null);
  }

  /**
   * From now on, hold the body back, or copy it if it turns out to be a stream.
   *
   * @param onStreamPastBound told when a stream grows past the bound, on the writing thread
   */
  void startCapture(@Nullable Runnable onStreamPastBound) {
    startCapture(onStreamPastBound, null);
  }

  /**
   * From now on, hold the body back, or copy it if it turns out to be a stream.
   *
   * @param onStreamPastBound told when a stream grows past the bound, on the writing thread
   * @param onRefused told when the container refuses a write or flush of what goes to the client
   *     (the client went away), on the writing thread, before the failure is thrown on
   */
  void startCapture(@Nullable Runnable onStreamPastBound, @Nullable Runnable onRefused) {
    capturing = true;
    buffer = new ByteArrayOutputStream(1024);
    this.onStreamPastBound = onStreamPastBound;
    this.onRefused = onRefused;
  }

  /** The handler returned a stream ({@code ResponseBodyEmitter}, {@code StreamingResponseBody}). */
  void streamingResult() {
    streamingResult = true;
  }

  /** Whether the handler returned a stream ({@link #streamingResult()}). */
  boolean returnsAStream() {
    return streamingResult;
  }

  /** Whether the body goes to the client as it comes, as a stream, a copy kept up to the bound. */
  boolean streamed() {
    return streamed;
  }

  /**
   * Whether the body was cut short after part of it went to the client: a write or flush failed
   * (the client went away), or the stream was ended by a timeout ({@link #cutShort()}).
   */
  boolean wasCutShort() {
    return cutShort;
  }

  /**
   * Whether the application wrote any of the body (held back, passed on, or refused by the
   * container): a stream that wrote nothing has sent nothing of its answer yet.
   */
  boolean wroteBody() {
    return wrote;
  }

  /** Part of the body went out, and the rest never will: what the client has is not the answer. */
  void cutShort() {
    cutShort = true;
  }

  /** Whether some of the body went to the client already: a stream, or a body past the bound. */
  boolean passedOn() {
    return streamed || overflowed;
  }

  /** At the first write or flush: a stream by its content type or by the handler's result. */
  private void decide() {
    if (decided || !capturing) {
      return;
    }
    decided = true;
    if (streamingResult || isStreamType(getContentType())) {
      streamed = true;
      if (declaredLength >= 0) {
        super.setContentLengthLong(declaredLength);
      }
    }
  }

  private static boolean isStreamType(@Nullable String contentType) {
    if (contentType == null) {
      return false;
    }
    String type = contentType.split(";", 2)[0].strip().toLowerCase(java.util.Locale.ROOT);
    return type.equals("text/event-stream") || type.equals("application/x-ndjson");
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
    if (streamed || overflowed || errorSent || redirected) {
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
    if (length > 0) {
      wrote = true;
    }
    decide();
    if (streamed) {
      passOn(() -> super.getOutputStream().write(bytes, offset, length));
      copy(bytes, offset, length);
    } else if (overflowed || buffer == null) {
      passOn(() -> super.getOutputStream().write(bytes, offset, length));
    } else {
      buffer.write(bytes, offset, length);
      overflowIfOverTheLimit();
    }
  }

  private void write(int b) throws IOException {
    write(new byte[] {(byte) b}, 0, 1);
  }

  /** Keeps a copy of what a stream sent, up to the bound; past it, drops the copy. */
  private void copy(byte[] bytes, int offset, int length) {
    ByteArrayOutputStream copy = buffer;
    if (copy == null || overflowed) {
      return;
    }
    if (copy.size() + (long) length > limit) {
      buffer = null;
      overflowed = true; // past the bound: recorded as answered, the body not kept
      Runnable told = onStreamPastBound;
      if (told != null) {
        told.run();
      }
      return;
    }
    copy.write(bytes, offset, length);
  }

  /** A write or flush to the client; one the container refuses means the client went away. */
  private void passOn(Output output) throws IOException {
    try {
      output.write();
    } catch (IOException e) {
      cutShort = true;
      Runnable told = onRefused;
      if (told != null) {
        told.run();
      }
      throw e;
    }
  }

  /** A write or flush of the wrapped response. */
  @FunctionalInterface
  private interface Output {
    void write() throws IOException;
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
    passOn(() -> super.getOutputStream().write(held));
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
    decide();
    if (writer != null && capturing) {
      writer.flush(); // into the buffer, or on to the client if it is passed on
    }
    if (!capturing) {
      super.flushBuffer();
    } else if (passedOn()) {
      passOn(super::flushBuffer);
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
    if (holding()) {
      declaredLength = length; // set from the body held back, when it is sent
    } else {
      super.setContentLengthLong(length);
    }
  }

  @Override
  public void setHeader(String name, String value) {
    if (holding() && "Content-Length".equalsIgnoreCase(name)) {
      declareLength(value);
    } else {
      super.setHeader(name, value);
    }
  }

  @Override
  public void addHeader(String name, String value) {
    if (holding() && "Content-Length".equalsIgnoreCase(name)) {
      declareLength(value);
    } else {
      super.addHeader(name, value);
    }
  }

  @Override
  public void setIntHeader(String name, int value) {
    if (holding() && "Content-Length".equalsIgnoreCase(name)) {
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

  /** Whether a body written now would be held back (the stream decision may still come). */
  private boolean holding() {
    return capturing && !overflowed && !streamed;
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
      decide();
      if (passedOn()) {
        passOn(() -> CapturingResponse.super.getOutputStream().flush());
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
