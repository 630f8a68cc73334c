package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.http.HttpResponse;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

/**
 * The set-up the MVC probes of work that outlives its request share: Spring MVC's async executor
 * (one thread in their applications) held by an unguarded request, so that the probe's work is
 * queued and taken over at the timeout, or not held, so that it begins at once; the work waits
 * until its client got the timeout's answer ({@link #firstAnswered}) before it goes on. One per
 * probe application's controller, used by one test at a time.
 */
final class HeldExecutor {

  /** Counted down once the unguarded request holds the executor's thread. */
  volatile CountDownLatch blockStarted = new CountDownLatch(1);

  /** Counted down to let the unguarded request end. */
  volatile CountDownLatch release = new CountDownLatch(1);

  /** Counted down once the probe's first request got its answer: the work awaits it. */
  volatile CountDownLatch firstAnswered = new CountDownLatch(0);

  /**
   * The unguarded request's work: holds the executor's thread until the test releases it (60 s at
   * most), whatever its own request's timeout does.
   */
  Callable<String> block() {
    CountDownLatch started = blockStarted;
    CountDownLatch held = release;
    return () -> {
      started.countDown();
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      while (held.getCount() > 0 && System.nanoTime() < deadline) {
        try {
          held.await(100, TimeUnit.MILLISECONDS);
        } catch (InterruptedException timeoutCancel) {
          // its own request's timeout: keep the thread busy regardless
        }
      }
      return "done";
    };
  }

  /**
   * The probe's first request: its work queued behind the held executor if {@code queued} (posted
   * to {@code blockPath} first), else begun at once; the work goes on once the client got its
   * answer (or at once, if {@code holdTheWork} is false), and this waits (20 s at most) until
   * {@code workDone}.
   *
   * @return the first request's answer
   */
  HttpResponse<byte[]> firstAnswer(
      int port,
      String blockPath,
      boolean queued,
      boolean holdTheWork,
      Callable<HttpResponse<byte[]>> post,
      BooleanSupplier workDone)
      throws Exception {
    CountDownLatch answered = new CountDownLatch(holdTheWork ? 1 : 0);
    firstAnswered = answered;
    CountDownLatch held = new CountDownLatch(1);
    release = held;
    blockStarted = new CountDownLatch(1);
    CompletableFuture<HttpResponse<byte[]>> blocking = null;
    if (queued) {
      blocking = MvcProbes.sendAsync(port, blockPath, null);
      assertThat(blockStarted.await(30, TimeUnit.SECONDS)).as("the executor held").isTrue();
    }
    HttpResponse<byte[]> first;
    try {
      first = post.call();
    } finally {
      answered.countDown(); // the work goes on
      held.countDown();
      if (blocking != null) {
        blocking.get(60, TimeUnit.SECONDS);
      }
    }
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (!workDone.getAsBoolean() && System.nanoTime() < deadline) {
      Thread.sleep(20);
    }
    return first;
  }
}
