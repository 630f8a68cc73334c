package dev.idempotency.spi;

import static java.time.Duration.ZERO;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.UUID;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import org.junit.jupiter.api.Test;

/**
 * The contract every {@link KeyStore} must pass, run against a real backend. A store's test extends
 * this class and returns its store from {@link #store()}; each test uses fresh key ids, so no
 * cleanup is needed between tests.
 *
 * <p>Time: for a store that takes time from the request, tests move time by passing a later {@code
 * now}. For a store with {@link KeyStore#usesServerTime() server time}, tests use short leases and
 * windows and poll, bounded, until the server's time has passed them.
 */
public abstract class KeyStoreContract {

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

  private boolean serverTime() {
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

  private static void pause(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  private static StoredRecord existing(ClaimResult result) {
    assertThat(result).isInstanceOf(ClaimResult.Existing.class);
    return ((ClaimResult.Existing) result).record();
  }

  private static boolean isClaimed(ClaimResult result) {
    return result instanceof ClaimResult.Claimed;
  }

  @Test
  void claimOfAnAbsentKeyIsTheFirstAttempt() {
    ClaimResult result = store().claim(claim(newKeyId(), newToken()));

    assertThat(result).isEqualTo(new ClaimResult.Claimed(1, false));
  }

  @Test
  void secondClaimReturnsTheInProgressRecordAndChangesNothing() {
    String keyId = newKeyId();
    store()
        .claim(
            new ClaimRequest(
                keyId, newToken(), "fp-1", T0, LONG_LEASE, LONG_RETENTION, true, null));

    ClaimResult second = store().claim(claim(keyId, newToken()));

    assertThat(second).isInstanceOf(ClaimResult.Existing.class);
    assertThat(((ClaimResult.Existing) second).leaseExpired()).isFalse();
    StoredRecord record = existing(second);
    assertThat(record.state()).isEqualTo(RecordState.IN_PROGRESS);
    assertThat(record.attempt()).isEqualTo(1);
    assertThat(record.fingerprint()).isEqualTo("fp-1");
    assertThat(record.payload()).isNull();
    assertThat(record.completedAt()).isNull();
    assertThat(record.leaseDeadline()).isAfter(record.createdAt());
    assertThat(record.retentionDeadline()).isAfter(record.leaseDeadline());
  }

  @Test
  void completedRecordIsReplayedWithItsPayload() {
    String keyId = newKeyId();
    String token = newToken();
    store().claim(claim(keyId, token));

    assertThat(store().complete(complete(keyId, token, bytes("n_801")))).isTrue();
    StoredRecord record = existing(store().claim(claim(keyId, newToken())));

    assertThat(record.state()).isEqualTo(RecordState.COMPLETED);
    assertThat(record.payload()).isEqualTo(bytes("n_801"));
    assertThat(record.completedAt()).isNotNull();
    assertThat(record.attempt()).isEqualTo(1);
  }

  @Test
  void failedRecordIsKeptAndReturned() {
    String keyId = newKeyId();
    String token = newToken();
    store().claim(claim(keyId, token));

    boolean written =
        store()
            .complete(
                new CompleteRequest(keyId, token, RecordState.FAILED, bytes("bad number"), T0));
    StoredRecord record = existing(store().claim(claim(keyId, newToken())));

    assertThat(written).isTrue();
    assertThat(record.state()).isEqualTo(RecordState.FAILED);
    assertThat(record.payload()).isEqualTo(bytes("bad number"));
  }

  @Test
  void completeWithAStaleTokenIsRefusedAndChangesNothing() {
    String keyId = newKeyId();
    store().claim(claim(keyId, newToken()));

    boolean written = store().complete(complete(keyId, newToken(), bytes("intruder")));

    assertThat(written).isFalse();
    StoredRecord record = existing(store().claim(claim(keyId, newToken())));
    assertThat(record.state()).isEqualTo(RecordState.IN_PROGRESS);
    assertThat(record.payload()).isNull();
  }

  @Test
  void completeOfAnAbsentKeyIsRefused() {
    assertThat(store().complete(complete(newKeyId(), newToken(), bytes("x")))).isFalse();
  }

  @Test
  void completedRecordCannotBeCompletedTwice() {
    String keyId = newKeyId();
    String token = newToken();
    store().claim(claim(keyId, token));
    store().complete(complete(keyId, token, bytes("first")));

    assertThat(store().complete(complete(keyId, token, bytes("second")))).isFalse();
    assertThat(existing(store().claim(claim(keyId, newToken()))).payload())
        .isEqualTo(bytes("first"));
  }

  @Test
  void releaseWithAStaleTokenIsRefusedAndWithTheOwnerTokenFreesTheKey() {
    String keyId = newKeyId();
    String token = newToken();
    store().claim(claim(keyId, token));

    assertThat(store().release(keyId, newToken())).isFalse();
    assertThat(existing(store().claim(claim(keyId, newToken()))).state())
        .isEqualTo(RecordState.IN_PROGRESS);

    assertThat(store().release(keyId, token)).isTrue();
    assertThat(store().claim(claim(keyId, newToken())))
        .isEqualTo(new ClaimResult.Claimed(1, false));
  }

  @Test
  void completedRecordCannotBeReleased() {
    String keyId = newKeyId();
    String token = newToken();
    store().claim(claim(keyId, token));
    store().complete(complete(keyId, token, bytes("done")));

    assertThat(store().release(keyId, token)).isFalse();
    assertThat(existing(store().claim(claim(keyId, newToken()))).state())
        .isEqualTo(RecordState.COMPLETED);
  }

  @Test
  void expiredLeaseIsTakenOverWithTheNextAttemptAndFencesTheOldOwner() {
    String keyId = newKeyId();
    String oldToken = newToken();
    Duration lease = expiringLease();
    store().claim(claim(keyId, oldToken, lease, expiringRetention().plus(LONG_LEASE)));

    String newOwner = newToken();
    ClaimResult takeover =
        claimAfter(
            claim(keyId, newOwner, lease, expiringRetention().plus(LONG_LEASE)),
            lease.plusMillis(1),
            KeyStoreContract::isClaimed);

    assertThat(takeover).isEqualTo(new ClaimResult.Claimed(2, true));
    assertThat(store().complete(complete(keyId, oldToken, bytes("late")))).isFalse();
    assertThat(store().release(keyId, oldToken)).isFalse();
    assertThat(store().complete(complete(keyId, newOwner, bytes("winner")))).isTrue();
    StoredRecord record = existing(store().claim(claim(keyId, newToken())));
    assertThat(record.payload()).isEqualTo(bytes("winner"));
    assertThat(record.attempt()).isEqualTo(2);
  }

  @Test
  void takeoverKeepsTheRetentionDeadline() {
    String keyId = newKeyId();
    Duration lease = expiringLease();
    Duration retention = expiringRetention().plus(LONG_LEASE);
    store().claim(claim(keyId, newToken(), lease, retention));
    Instant originalDeadline =
        existing(store().claim(claim(keyId, newToken()))).retentionDeadline();

    claimAfter(
        claim(keyId, newToken(), lease, retention),
        lease.plusMillis(1),
        KeyStoreContract::isClaimed);

    assertThat(existing(store().claim(claim(keyId, newToken()))).retentionDeadline())
        .isEqualTo(originalDeadline);
  }

  @Test
  void strictClaimDoesNotTakeOverAnExpiredLeaseButReportsIt() {
    String keyId = newKeyId();
    Duration lease = expiringLease();
    store().claim(claim(keyId, newToken(), lease, expiringRetention().plus(LONG_LEASE)));
    ClaimRequest strict =
        new ClaimRequest(
            keyId, newToken(), "", T0, lease, expiringRetention().plus(LONG_LEASE), false, null);

    ClaimResult result =
        claimAfter(
            strict,
            lease.plusMillis(1),
            r -> r instanceof ClaimResult.Existing e && e.leaseExpired());

    assertThat(result).isInstanceOf(ClaimResult.Existing.class);
    assertThat(((ClaimResult.Existing) result).leaseExpired()).isTrue();
    assertThat(existing(result).attempt()).isEqualTo(1);
  }

  @Test
  void expiredLeaseIsNotTakenOverWithADifferentFingerprint() {
    String keyId = newKeyId();
    Duration lease = expiringLease();
    Duration retention = expiringRetention().plus(LONG_LEASE);
    store().claim(new ClaimRequest(keyId, newToken(), "fp-a", T0, lease, retention, true, null));
    ClaimRequest other =
        new ClaimRequest(keyId, newToken(), "fp-b", T0, lease, retention, true, null);

    ClaimResult result =
        claimAfter(
            other,
            lease.plusMillis(1),
            r -> r instanceof ClaimResult.Existing e && e.leaseExpired());

    assertThat(existing(result).fingerprint()).isEqualTo("fp-a");
    assertThat(((ClaimResult.Existing) result).leaseExpired()).isTrue();
  }

  @Test
  void recordPastRetentionCountsAsAbsent() {
    String keyId = newKeyId();
    String token = newToken();
    Duration lease = expiringLease();
    Duration retention = expiringRetention();
    store().claim(claim(keyId, token, lease, retention));
    store().complete(complete(keyId, token, bytes("old")));

    ClaimResult result =
        claimAfter(
            claim(keyId, newToken(), lease, retention), retention, KeyStoreContract::isClaimed);

    assertThat(result).isEqualTo(new ClaimResult.Claimed(1, false));
  }

  @Test
  void fingerprintIsReturnedWithTheRecord() {
    String keyId = newKeyId();
    store()
        .claim(
            new ClaimRequest(keyId, newToken(), "abc", T0, LONG_LEASE, LONG_RETENTION, true, null));

    StoredRecord record =
        existing(
            store()
                .claim(
                    new ClaimRequest(
                        keyId, newToken(), "xyz", T0, LONG_LEASE, LONG_RETENTION, true, null)));

    assertThat(record.fingerprint()).isEqualTo("abc");
  }

  @Test
  void debugKeyDoesNotChangeIdentity() {
    String keyId = newKeyId();
    store()
        .claim(
            new ClaimRequest(
                keyId, newToken(), "", T0, LONG_LEASE, LONG_RETENTION, true, "otp:user_42"));

    ClaimResult second =
        store()
            .claim(
                new ClaimRequest(
                    keyId, newToken(), "", T0, LONG_LEASE, LONG_RETENTION, true, "other"));

    assertThat(second).isInstanceOf(ClaimResult.Existing.class);
  }

  @Test
  void emptyPayloadRoundTrips() {
    assertRoundTrip(new byte[0]);
  }

  @Test
  void everyByteValueRoundTrips() {
    byte[] payload = new byte[512];
    for (int i = 0; i < payload.length; i++) {
      payload[i] = (byte) i;
    }
    assertRoundTrip(payload);
  }

  @Test
  void oneMebibytePayloadRoundTrips() {
    byte[] payload = new byte[1024 * 1024];
    new Random(42).nextBytes(payload);
    assertRoundTrip(payload);
  }

  private void assertRoundTrip(byte[] payload) {
    String keyId = newKeyId();
    String token = newToken();
    store().claim(claim(keyId, token));
    assertThat(store().complete(complete(keyId, token, payload.clone()))).isTrue();

    byte[] stored = existing(store().claim(claim(keyId, newToken()))).payload();

    assertThat(stored).hasSize(payload.length);
    assertThat(stored).isEqualTo(payload);
  }

  @Test
  void thirtyTwoThreadsClaimingOneKeyGiveExactlyOneWinner() throws Exception {
    String keyId = newKeyId();
    int threads = 32;
    CountDownLatch start = new CountDownLatch(1);
    List<Callable<ClaimResult>> tasks = new ArrayList<>();
    for (int i = 0; i < threads; i++) {
      tasks.add(
          () -> {
            start.await();
            return store().claim(claim(keyId, newToken()));
          });
    }
    List<ClaimResult> results = runAll(tasks, start);

    assertThat(results.stream().filter(KeyStoreContract::isClaimed).count()).isEqualTo(1);
    assertThat(results.stream().filter(r -> r instanceof ClaimResult.Existing).count())
        .isEqualTo(threads - 1);
  }

  @Test
  void manyKeysInParallelDoNotCrossTalk() throws Exception {
    int threads = 16;
    int keysPerThread = 50;
    CountDownLatch start = new CountDownLatch(1);
    List<Callable<List<String>>> tasks = new ArrayList<>();
    for (int t = 0; t < threads; t++) {
      tasks.add(
          () -> {
            start.await();
            List<String> keyIds = new ArrayList<>();
            for (int k = 0; k < keysPerThread; k++) {
              String keyId = newKeyId();
              String token = newToken();
              assertThat(store().claim(claim(keyId, token)))
                  .isEqualTo(new ClaimResult.Claimed(1, false));
              assertThat(store().complete(complete(keyId, token, bytes(keyId)))).isTrue();
              keyIds.add(keyId);
            }
            return keyIds;
          });
    }
    List<List<String>> perThread = runAll(tasks, start);

    for (List<String> keyIds : perThread) {
      for (String keyId : keyIds) {
        assertThat(existing(store().claim(claim(keyId, newToken()))).payload())
            .isEqualTo(bytes(keyId));
      }
    }
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
    return text.getBytes(java.nio.charset.StandardCharsets.UTF_8);
  }

  // ---- extend: the fenced lease renewal the guard's keeper sends while a sender runs.

  /** Now, for a request to a store: request time moves by hand, server time is the clock's. */
  private Instant requestNow(Duration sinceT0) {
    return serverTime() ? Instant.now() : T0.plus(sinceT0);
  }

  /** Waits, bounded, until {@code duration} of real time has passed since {@code startNanos}. */
  private static void awaitElapsed(long startNanos, Duration duration) {
    long until = startNanos + duration.toNanos();
    long now;
    while ((now = System.nanoTime()) - until < 0) {
      pause(Math.max(1, TimeUnit.NANOSECONDS.toMillis(until - now)));
    }
  }

  @Test
  void extendWithTheOwnerTokenKeepsTheClaimPastItsFirstLease() {
    String keyId = newKeyId();
    String token = newToken();
    Duration lease = expiringLease();
    long start = System.nanoTime();
    store().claim(claim(keyId, token, lease, LONG_RETENTION));

    boolean extended =
        store()
            .extend(extend(keyId, token, lease.multipliedBy(10), requestNow(lease.dividedBy(2))));
    if (serverTime()) {
      awaitElapsed(start, lease.multipliedBy(2));
    }
    ClaimResult later =
        store().claim(claim(keyId, newToken()).withNow(requestNow(lease.multipliedBy(2))));

    assertThat(extended).isTrue();
    assertThat(later).isInstanceOf(ClaimResult.Existing.class);
    assertThat(((ClaimResult.Existing) later).leaseExpired())
        .as("the renewed lease has not passed")
        .isFalse();
    assertThat(existing(later).attempt()).isEqualTo(1);
    assertThat(store().complete(complete(keyId, token, bytes("renewed")))).isTrue();
  }

  @Test
  void extendWithAStaleTokenIsRefusedAndTheLeaseStillRunsOut() {
    String keyId = newKeyId();
    Duration lease = expiringLease();
    store().claim(claim(keyId, newToken(), lease, LONG_RETENTION));

    boolean extended = store().extend(extend(keyId, newToken(), LONG_LEASE, requestNow(ZERO)));
    ClaimResult takeover =
        claimAfter(
            claim(keyId, newToken(), lease, LONG_RETENTION),
            lease.plusMillis(1),
            KeyStoreContract::isClaimed);

    assertThat(extended).isFalse();
    assertThat(takeover).isEqualTo(new ClaimResult.Claimed(2, true));
  }

  @Test
  void extendAfterATakeoverIsRefusedForTheOldOwner() {
    String keyId = newKeyId();
    String oldToken = newToken();
    Duration lease = expiringLease();
    store().claim(claim(keyId, oldToken, lease, LONG_RETENTION));
    String newOwner = newToken();
    claimAfter(
        claim(keyId, newOwner, lease, LONG_RETENTION),
        lease.plusMillis(1),
        KeyStoreContract::isClaimed);

    assertThat(
            store().extend(extend(keyId, oldToken, LONG_LEASE, requestNow(lease.multipliedBy(2)))))
        .isFalse();
    assertThat(
            store().extend(extend(keyId, newOwner, LONG_LEASE, requestNow(lease.multipliedBy(2)))))
        .isTrue();
  }

  @Test
  void extendOfACompletedReleasedOrAbsentRecordIsRefusedAndBringsNothingBack() {
    String completed = newKeyId();
    String completedToken = newToken();
    store().claim(claim(completed, completedToken));
    store().complete(complete(completed, completedToken, bytes("done")));
    String released = newKeyId();
    String releasedToken = newToken();
    store().claim(claim(released, releasedToken));
    store().release(released, releasedToken);
    String absent = newKeyId();

    assertThat(store().extend(extend(completed, completedToken, LONG_LEASE, requestNow(ZERO))))
        .isFalse();
    assertThat(store().extend(extend(released, releasedToken, LONG_LEASE, requestNow(ZERO))))
        .isFalse();
    assertThat(store().extend(extend(absent, newToken(), LONG_LEASE, requestNow(ZERO)))).isFalse();
    assertThat(existing(store().claim(claim(completed, newToken()))).state())
        .isEqualTo(RecordState.COMPLETED);
    assertThat(store().claim(claim(released, newToken())))
        .isEqualTo(new ClaimResult.Claimed(1, false));
    assertThat(store().claim(claim(absent, newToken())))
        .isEqualTo(new ClaimResult.Claimed(1, false));
  }

  @Test
  void extendNeverMovesTheLeasePastTheWindow() {
    String keyId = newKeyId();
    String token = newToken();
    Duration retention = Duration.ofHours(1);
    store().claim(claim(keyId, token, LONG_LEASE, retention));

    assertThat(store().extend(extend(keyId, token, Duration.ofDays(2), requestNow(ZERO)))).isTrue();
    StoredRecord record = existing(store().claim(claim(keyId, newToken(), LONG_LEASE, retention)));

    assertThat(record.leaseDeadline()).isBeforeOrEqualTo(record.retentionDeadline());
    assertThat(record.retentionDeadline())
        .as("the window is not moved")
        .isEqualTo(record.createdAt().plus(retention));
  }

  @Test
  void takeoverLeaseNeverOutlivesTheWindow() {
    String keyId = newKeyId();
    Duration lease = expiringLease();
    Duration retention = expiringRetention().plus(lease);
    store().claim(claim(keyId, newToken(), lease, retention));

    Duration longTakeoverLease = retention.multipliedBy(10);
    claimAfter(
        new ClaimRequest(
            keyId, newToken(), "", T0, longTakeoverLease, retention.multipliedBy(20), true, null),
        lease.plusMillis(1),
        KeyStoreContract::isClaimed);
    StoredRecord record = existing(store().claim(claim(keyId, newToken())));

    assertThat(record.attempt()).isEqualTo(2);
    assertThat(record.leaseDeadline())
        .as("a takeover's lease is capped at the record's window")
        .isBeforeOrEqualTo(record.retentionDeadline());
  }

  @Test
  void extendAllIsFencedPerKey() {
    List<ExtendRequest> renewals = new ArrayList<>();
    for (int i = 0; i < 10; i++) {
      String keyId = newKeyId();
      String token = newToken();
      store().claim(claim(keyId, token));
      renewals.add(extend(keyId, i % 2 == 0 ? token : newToken(), LONG_LEASE, requestNow(ZERO)));
    }

    List<Boolean> extended = store().extendAll(renewals);

    for (int i = 0; i < 10; i++) {
      assertThat(extended.get(i)).as("key %d", i).isEqualTo(i % 2 == 0);
    }
  }

  // ---- the guard on this store, where time passes for real: lease renewal and long batches.

  /** The lease of the real-time guard tests: short, so that the tests outlive it several times. */
  protected static final Duration RENEWED_LEASE = Duration.ofSeconds(1);

  /**
   * A sender that runs three leases is renewed in the background and never taken over: a second
   * caller polling all along only ever sees it in progress, then gets its result.
   */
  @Test
  void senderThatOutlivesItsLeaseIsRenewedAndNeverTakenOver() throws Exception {
    dev.idempotency.IdempotencyGuard guard =
        dev.idempotency.IdempotencyGuard.builder()
            .store(store())
            .lease(RENEWED_LEASE)
            .inFlightWait(ZERO)
            .build();
    String key = "renewal:" + newKeyId();
    java.util.concurrent.atomic.AtomicInteger sends =
        new java.util.concurrent.atomic.AtomicInteger();
    CountDownLatch sending = new CountDownLatch(1);
    ExecutorService pool = Executors.newSingleThreadExecutor();
    try {
      Future<String> slow =
          pool.submit(
              () ->
                  guard.execute(
                      key,
                      LONG_RETENTION,
                      ctx -> {
                        sends.incrementAndGet();
                        sending.countDown();
                        awaitElapsed(System.nanoTime(), RENEWED_LEASE.multipliedBy(3));
                        return "slow";
                      }));
      assertThat(sending.await(30, TimeUnit.SECONDS)).isTrue();
      int polls = 0;
      while (!slow.isDone()) {
        try {
          guard.execute(key, LONG_RETENTION, ctx -> "second-" + sends.incrementAndGet());
        } catch (dev.idempotency.IdempotencyInProgressException expected) {
          polls++;
        }
        pause(50);
      }

      assertThat(slow.get(30, TimeUnit.SECONDS)).isEqualTo("slow");
      assertThat(sends).as("the slow send was never taken over").hasValue(1);
      assertThat(polls).as("the second caller polled while it ran").isGreaterThan(10);
      String replay = guard.execute(key, LONG_RETENTION, ctx -> "again");
      assertThat(replay).isEqualTo("slow");
    } finally {
      pool.shutdownNow();
    }
  }

  /**
   * A batch that runs four times its lease, each send well within the lease, with a second worker
   * claiming the same keys all along: every key is sent exactly once, and every outcome recorded.
   */
  @Test
  void batchThatOutlivesItsLeaseWithASecondWorkerSendsEachKeyOnce() throws Exception {
    dev.idempotency.IdempotencyGuard first =
        dev.idempotency.IdempotencyGuard.builder().store(store()).lease(RENEWED_LEASE).build();
    dev.idempotency.IdempotencyGuard second =
        dev.idempotency.IdempotencyGuard.builder().store(store()).lease(RENEWED_LEASE).build();
    String run = newKeyId();
    List<dev.idempotency.IdempotencyRequest> requests = new ArrayList<>();
    for (int i = 0; i < 10; i++) {
      requests.add(
          dev.idempotency.IdempotencyRequest.of("long-batch:" + run + ":" + i, LONG_RETENTION));
    }
    java.util.Map<String, List<String>> sends = new java.util.concurrent.ConcurrentHashMap<>();
    java.util.concurrent.atomic.AtomicBoolean firstDone =
        new java.util.concurrent.atomic.AtomicBoolean();
    CountDownLatch firstClaimed = new CountDownLatch(1);
    ExecutorService pool = Executors.newSingleThreadExecutor();
    try {
      Future<dev.idempotency.Batch.Recorded> firstRun =
          pool.submit(
              () -> {
                try {
                  dev.idempotency.Batch<String> batch =
                      first.claimBatch(requests, dev.idempotency.ResultCodec.string());
                  firstClaimed.countDown();
                  for (dev.idempotency.Batch.Item item : batch.toSend()) {
                    sends
                        .computeIfAbsent(
                            item.key(), k -> new java.util.concurrent.CopyOnWriteArrayList<>())
                        .add("first");
                    awaitElapsed(System.nanoTime(), RENEWED_LEASE.multipliedBy(2).dividedBy(5));
                    batch.succeeded(item, "first:" + item.key());
                  }
                  return batch.record();
                } finally {
                  firstDone.set(true);
                }
              });
      assertThat(firstClaimed.await(60, TimeUnit.SECONDS)).isTrue();
      int secondSent = 0;
      while (!firstDone.get()) {
        dev.idempotency.Batch<String> batch =
            second.claimBatch(requests, dev.idempotency.ResultCodec.string());
        for (dev.idempotency.Batch.Item item : batch.toSend()) {
          sends
              .computeIfAbsent(item.key(), k -> new java.util.concurrent.CopyOnWriteArrayList<>())
              .add("second");
          batch.succeeded(item, "second:" + item.key());
          secondSent++;
        }
        batch.record();
        pause(100);
      }
      dev.idempotency.Batch.Recorded recorded = firstRun.get(60, TimeUnit.SECONDS);

      assertThat(sends).hasSize(10);
      assertThat(sends.values())
          .as("sends per key, first worker and second worker together")
          .allSatisfy(senders -> assertThat(senders).hasSize(1));
      assertThat(secondSent).as("the second worker sent nothing: every key was held").isZero();
      assertThat(recorded.completed()).isEqualTo(10);
      assertThat(recorded.notRecorded()).isEmpty();
      dev.idempotency.Batch<String> repeat =
          second.claimBatch(requests, dev.idempotency.ResultCodec.string());
      assertThat(repeat.replayed()).hasSize(10);
      assertThat(repeat.replayed().values())
          .allSatisfy(outcome -> assertThat(outcome.value()).startsWith("first:"));
    } finally {
      pool.shutdownNow();
    }
  }

  // ---- batch and async: the same per-key semantics through claimAll, completeAll and the guard.

  @Test
  void claimAllSortsFreshInFlightAndCompletedKeysPerKey() {
    String inFlight = newKeyId();
    String completed = newKeyId();
    String completedToken = newToken();
    store().claim(claim(inFlight, newToken()));
    store().claim(claim(completed, completedToken));
    store().complete(complete(completed, completedToken, bytes("n_1")));
    List<ClaimRequest> batch = new ArrayList<>();
    List<String> fresh = new ArrayList<>();
    for (int i = 0; i < 20; i++) {
      String keyId = newKeyId();
      fresh.add(keyId);
      batch.add(claim(keyId, newToken()));
    }
    batch.add(claim(inFlight, newToken()));
    batch.add(claim(completed, newToken()));

    List<ClaimResult> results = store().claimAll(batch);

    assertThat(results).hasSize(22);
    assertThat(results.subList(0, 20)).containsOnly(new ClaimResult.Claimed(1, false));
    assertThat(existing(results.get(20)).state()).isEqualTo(RecordState.IN_PROGRESS);
    assertThat(existing(results.get(21)).payload()).isEqualTo(bytes("n_1"));
    for (int i = 0; i < 20; i++) {
      assertThat(
              store().complete(complete(fresh.get(i), batch.get(i).ownerToken(), bytes("b" + i))))
          .as("each key of the batch is owned by its own token")
          .isTrue();
    }
  }

  @Test
  void completeAllIsFencedPerKey() {
    List<CompleteRequest> completes = new ArrayList<>();
    List<String> keyIds = new ArrayList<>();
    for (int i = 0; i < 10; i++) {
      String keyId = newKeyId();
      String token = newToken();
      keyIds.add(keyId);
      store().claim(claim(keyId, token));
      completes.add(complete(keyId, i % 2 == 0 ? token : newToken(), bytes("r" + i)));
    }

    List<Boolean> written = store().completeAll(completes);

    for (int i = 0; i < 10; i++) {
      assertThat(written.get(i)).as("key %d", i).isEqualTo(i % 2 == 0);
      StoredRecord record = existing(store().claim(claim(keyIds.get(i), newToken())));
      assertThat(record.state())
          .isEqualTo(i % 2 == 0 ? RecordState.COMPLETED : RecordState.IN_PROGRESS);
    }
  }

  @Test
  void largeBatchThroughTheGuardClaimsOnlyUnsentKeysAndRepeatsSendNothing() {
    dev.idempotency.IdempotencyGuard guard =
        dev.idempotency.IdempotencyGuard.builder().store(store()).build();
    String run = newKeyId();
    List<dev.idempotency.IdempotencyRequest> requests = new ArrayList<>();
    for (int i = 0; i < 2_500; i++) {
      requests.add(dev.idempotency.IdempotencyRequest.of("batch:" + run + ":" + i, LONG_RETENTION));
    }
    for (int i = 0; i < requests.size(); i += 10) {
      guard.execute(requests.get(i).key(), LONG_RETENTION, ctx -> "early");
    }

    dev.idempotency.Batch<String> batch =
        guard.claimBatch(requests, dev.idempotency.ResultCodec.string());
    for (dev.idempotency.Batch.Item item : batch.toSend()) {
      batch.succeeded(item, "n:" + item.key());
    }
    dev.idempotency.Batch.Recorded recorded = batch.record();
    dev.idempotency.Batch<String> again =
        guard.claimBatch(requests, dev.idempotency.ResultCodec.string());

    assertThat(batch.claimedKeys()).hasSize(2_250);
    assertThat(batch.replayed())
        .hasSize(250)
        .allSatisfy((key, outcome) -> assertThat(outcome.value()).isEqualTo("early"));
    assertThat(recorded.completed()).isEqualTo(2_250);
    assertThat(recorded.notRecorded()).isEmpty();
    assertThat(again.toSend()).as("a repeated batch sends nothing").isEmpty();
    assertThat(again.replayed()).hasSize(2_500);
    assertThat(again.replayed().get(requests.get(1).key()).value())
        .isEqualTo("n:" + requests.get(1).key());
  }

  @Test
  void asyncExecuteReplaysAndSendsOncePerKey() throws Exception {
    dev.idempotency.IdempotencyGuard guard =
        dev.idempotency.IdempotencyGuard.builder()
            .store(store())
            .inFlightWait(Duration.ofSeconds(60))
            .build();
    String key = "async:" + newKeyId();
    java.util.concurrent.atomic.AtomicInteger sends =
        new java.util.concurrent.atomic.AtomicInteger();
    List<java.util.concurrent.CompletableFuture<String>> calls = new ArrayList<>();
    for (int i = 0; i < 16; i++) {
      calls.add(
          guard
              .executeAsync(
                  key,
                  LONG_RETENTION,
                  ctx ->
                      java.util.concurrent.CompletableFuture.supplyAsync(
                          () -> "n_" + sends.incrementAndGet()))
              .toCompletableFuture());
    }

    List<String> results = new ArrayList<>();
    for (java.util.concurrent.CompletableFuture<String> call : calls) {
      results.add(call.get(60, TimeUnit.SECONDS));
    }

    assertThat(sends).hasValue(1);
    assertThat(results).containsOnly("n_1");
  }
}
