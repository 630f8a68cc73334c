package dev.idempotency.tck;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spi.StoredRecord;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;

/**
 * What the contracts share: the store under test, fresh key ids and owner tokens, requests at a
 * fixed request time, and time that passes either by moving the request's {@code now} or, for a
 * store on {@link KeyStore#usesServerTime() server time}, for real (short leases, bounded polls).
 */
public abstract class StoreContractSupport {

  /** The start of request time for stores that honour it. */
  protected static final Instant T0 = Instant.parse("2030-01-01T00:00:00Z");

  /** A lease long enough never to pass by accident during a test. */
  protected static final Duration LONG_LEASE = Duration.ofMinutes(10);

  /** A window long enough never to pass by accident during a test. */
  protected static final Duration LONG_RETENTION = Duration.ofHours(24);

  /** How long a bounded poll for server time to pass may take. */
  protected static final Duration POLL_LIMIT = Duration.ofSeconds(30);

  /**
   * The store under test, shared by all tests of the class.
   *
   * @return the store
   */
  protected abstract KeyStore store();

  /** A key id no other test uses. */
  protected static String newKeyId() {
    return UUID.randomUUID().toString().replace("-", "") + "_contract";
  }

  /** A fresh owner token. */
  protected static String newToken() {
    return UUID.randomUUID().toString();
  }

  protected ClaimRequest claim(String keyId, String token, Duration lease, Duration retention) {
    return new ClaimRequest(keyId, token, "", T0, lease, retention, true, null);
  }

  protected ClaimRequest claim(String keyId, String token) {
    return claim(keyId, token, LONG_LEASE, LONG_RETENTION);
  }

  protected ExtendRequest extend(String keyId, String token, Duration lease, Instant now) {
    return new ExtendRequest(keyId, token, lease, now);
  }

  protected CompleteRequest complete(String keyId, String token, byte[] payload) {
    return new CompleteRequest(keyId, token, RecordState.COMPLETED, payload, T0.plusSeconds(1));
  }

  protected boolean serverTime() {
    return store().usesServerTime();
  }

  /** A lease for tests that let it expire: short on server time, as long as any on request time. */
  protected Duration expiringLease() {
    return serverTime() ? Duration.ofMillis(300) : LONG_LEASE;
  }

  /** A window for tests that let it expire. */
  protected Duration expiringRetention() {
    return serverTime() ? Duration.ofMillis(1500) : LONG_RETENTION;
  }

  /**
   * Claims again once {@code elapsed} has passed: on request time by moving {@code now}, on server
   * time by polling (bounded) until the result satisfies {@code done}.
   */
  protected ClaimResult claimAfter(
      ClaimRequest request, Duration elapsed, Predicate<ClaimResult> done) {
    if (!serverTime()) {
      return store().claim(request.withNow(request.now().plus(elapsed)));
    }
    long deadline = System.nanoTime() + POLL_LIMIT.toNanos();
    ClaimResult last;
    do {
      last = store().claim(request.withNow(Instant.now()));
      if (done.test(last)) {
        return last;
      }
      pause(20);
    } while (System.nanoTime() < deadline);
    return last;
  }

  protected static void pause(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  protected static StoredRecord existing(ClaimResult result) {
    assertThat(result).isInstanceOf(ClaimResult.Existing.class);
    return ((ClaimResult.Existing) result).record();
  }

  protected static boolean isClaimed(ClaimResult result) {
    return result instanceof ClaimResult.Claimed;
  }

  /** Runs the tasks on their own threads, releases the latch, and returns results in order. */
  protected static <R> List<R> runAll(List<Callable<R>> tasks, CountDownLatch start)
      throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(tasks.size());
    try {
      List<Future<R>> futures = new ArrayList<>();
      for (Callable<R> task : tasks) {
        futures.add(pool.submit(task));
      }
      start.countDown();
      List<R> results = new ArrayList<>();
      for (Future<R> future : futures) {
        results.add(future.get(120, TimeUnit.SECONDS));
      }
      return results;
    } finally {
      pool.shutdownNow();
      if (!pool.awaitTermination(30, TimeUnit.SECONDS)) {
        fail("worker threads did not stop");
      }
    }
  }

  protected static byte[] bytes(String text) {
    return text.getBytes(StandardCharsets.UTF_8);
  }

  /** Now, for a request to a store: request time moves by hand, server time is the clock's. */
  protected Instant requestNow(Duration sinceT0) {
    return serverTime() ? Instant.now() : T0.plus(sinceT0);
  }

  /** Waits, bounded, until {@code duration} of real time has passed since {@code startNanos}. */
  protected static void awaitElapsed(long startNanos, Duration duration) {
    long until = startNanos + duration.toNanos();
    long now;
    while ((now = System.nanoTime()) - until < 0) {
      pause(Math.max(1, TimeUnit.NANOSECONDS.toMillis(until - now)));
    }
  }
}
