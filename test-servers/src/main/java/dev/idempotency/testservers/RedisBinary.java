package dev.idempotency.testservers;

import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import redis.embedded.RedisExecProvider;
import redis.embedded.RedisServer;
import redis.embedded.exceptions.EmbeddedRedisException;
import redis.embedded.util.OsArchitecture;

/**
 * The embedded redis-server binary, written to disk once per JVM, and a start that survives the
 * kernel's {@code ETXTBSY}.
 *
 * <p>The embedded-redis library copies its binary to a new temporary file for every server it
 * builds. While one thread writes that copy, a process that another thread forks inherits the open
 * file, and executing the copy then fails with {@code error=26, Text file busy}. Tests that start
 * servers from several threads at once (the reliability module runs two test classes at a time) hit
 * it. Here the copy is made once, and a start that still meets the error (the fork of another
 * thread can hold even the single copy's descriptor for a moment) is tried again.
 */
public final class RedisBinary {
  private static final int STARTS = 20;
  private static RedisExecProvider provider;

  private RedisBinary() {}

  /** A provider that always hands out the same, already written, binary. */
  public static synchronized RedisExecProvider provider() {
    if (provider == null) {
      try {
        File binary = RedisExecProvider.defaultProvider().get();
        OsArchitecture here = OsArchitecture.detect();
        provider =
            RedisExecProvider.defaultProvider()
                .override(here.os(), here.arch(), binary.getAbsolutePath());
      } catch (IOException e) {
        throw new UncheckedIOException("could not write the embedded redis-server binary", e);
      }
    }
    return provider;
  }

  /**
   * Starts {@code server}, trying again while the kernel reports the binary busy.
   *
   * @throws EmbeddedRedisException on any other failure, or when the binary stays busy
   */
  public static void start(RedisServer server) {
    for (int attempt = 1; ; attempt++) {
      try {
        server.start();
        return;
      } catch (EmbeddedRedisException e) {
        if (!textFileBusy(e) || attempt == STARTS) {
          throw e;
        }
        try {
          Thread.sleep(10L * attempt);
        } catch (InterruptedException interrupted) {
          Thread.currentThread().interrupt();
          throw e;
        }
      }
    }
  }

  private static boolean textFileBusy(Throwable e) {
    for (Throwable t = e; t != null; t = t.getCause()) {
      if (t instanceof IOException && String.valueOf(t.getMessage()).contains("error=26")) {
        return true;
      }
    }
    return false;
  }
}
