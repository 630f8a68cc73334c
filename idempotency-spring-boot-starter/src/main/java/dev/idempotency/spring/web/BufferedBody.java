package dev.idempotency.spring.web;

import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import org.jspecify.annotations.Nullable;

/**
 * Where a stream taken over writes, its request gone: kept in memory up to the bound of a stored
 * body, then dropped (it is stored without its body, as a stream past the bound is on time). The
 * {@code StreamingResponseBody} that {@link UninterruptedWork} shields writes here once the starter
 * runs it detached from its request ({@link AsyncWork#takeOverQueuedWork}), and the stream's end is
 * recorded from what it holds ({@link StreamEnd}). Thread-safe: written on the thread that runs the
 * stream, read on the one that records its end.
 */
final class BufferedBody extends OutputStream implements AsyncWork.WrittenBody {
  private final long limit;
  private @Nullable ByteArrayOutputStream kept = new ByteArrayOutputStream(); // guarded by this
  private volatile boolean wrote;

  BufferedBody(long limit) {
    this.limit = limit;
  }

  @Override
  public void write(int b) {
    write(new byte[] {(byte) b}, 0, 1);
  }

  @Override
  public synchronized void write(byte[] b, int off, int len) {
    if (len <= 0) {
      return;
    }
    wrote = true;
    ByteArrayOutputStream buffer = kept;
    if (buffer != null && buffer.size() + (long) len <= limit) {
      buffer.write(b, off, len);
    } else {
      kept = null; // past the bound: not stored
    }
  }

  @Override
  public boolean wrote() {
    return wrote;
  }

  @Override
  public synchronized byte @Nullable [] bytes() {
    ByteArrayOutputStream buffer = kept;
    return buffer == null ? null : buffer.toByteArray();
  }
}
