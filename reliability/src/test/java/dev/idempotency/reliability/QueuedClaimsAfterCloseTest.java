package dev.idempotency.reliability;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyObserver;
import dev.idempotency.IdempotencyRecord;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spi.RecordState;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Issue 37 (probeA's probe, hand39 and close47, SPEC 14): {@code executeAsync} on PostgreSQL while
 * the store's table is locked by another transaction: 16 claims hold the guard's 16 store-io
 * threads, 24 more wait in its queue. close() with a grace of 300 ms gives up on them; the lock is
 * let go 1 s after close() began, within the 5 s operation timeout. docs/operations.md (Closing a
 * guard, 3): "A call that had not started its send by then never starts it (a crash would not
 * either)". Checked: nothing is sent; every caller gets an exception; and no key is left {@code
 * IN_PROGRESS} (held for a lease though nothing was sent) by a claim that ran, or whose answer was
 * used, after close() gave up. Both failed on the code before the fix (40 of 40 keys held; in
 * strict mode 40 of 40 refused as of unknown outcome).
 */
class QueuedClaimsAfterCloseTest {

  static final Duration TTL = Duration.ofHours(1);
  static final int CALLS = 40;

  /**
   * @param policy {@code TAKE_OVER} (default): the keys must not be held; {@code REFUSE} (strict
   *     mode, lease 2 s): once the stray claims' leases ran out, the keys must still be sendable
   */
  @org.junit.jupiter.params.ParameterizedTest
  @org.junit.jupiter.params.provider.EnumSource(dev.idempotency.TakeoverPolicy.class)
  void claimsQueuedWhenCloseGivesUpNeitherSendNorHoldTheirKeys(
      dev.idempotency.TakeoverPolicy policy) throws Exception {
    try (RestartablePostgres postgres = new RestartablePostgres()) {
      KeyStore store = Stores.open(postgres.url(), 48);
      AtomicInteger started = new AtomicInteger();
      IdempotencyGuard guard =
          IdempotencyGuard.builder()
              .store(store)
              .closeGracePeriod(Duration.ofMillis(300))
              .lease(Duration.ofSeconds(2))
              .takeoverPolicy(policy)
              .observer(
                  new IdempotencyObserver() {
                    @Override
                    public CallObservation onCallStart(String operation, String storeKind) {
                      started.incrementAndGet();
                      return CallObservation.NONE;
                    }
                  })
              .build();
      AtomicInteger sends = new AtomicInteger();
      ExecutorService closer = Executors.newSingleThreadExecutor();
      List<String> keys = new ArrayList<>();
      List<CompletableFuture<String>> stages = new ArrayList<>();
      try (Connection locker = DriverManager.getConnection(postgres.url())) {
        locker.setAutoCommit(false);
        try (Statement lock = locker.createStatement()) {
          lock.execute("LOCK TABLE idem_reliability IN ACCESS EXCLUSIVE MODE");
        }
        for (int i = 0; i < CALLS; i++) {
          String key = "queued:" + System.nanoTime() + ":" + i;
          keys.add(key);
          stages.add(
              guard
                  .executeAsync(
                      key,
                      TTL,
                      ctx -> {
                        sends.incrementAndGet();
                        return CompletableFuture.completedFuture("n_" + key);
                      })
                  .toCompletableFuture());
        }
        assertThat(started.get()).isEqualTo(CALLS);
        Future<?> closing = closer.submit(guard::close);
        // a fault schedule: the table stays locked past the grace, less than the operation timeout
        Thread.sleep(1000);
        locker.rollback();
        closing.get(60, TimeUnit.SECONDS);
      }
      List<String> problems = new ArrayList<>();
      for (CompletableFuture<String> stage : stages) {
        try {
          problems.add("a caller got " + stage.get(60, TimeUnit.SECONDS));
        } catch (ExecutionException expected) {
          // refused or abandoned: an exception, nothing sent
        }
      }
      IdempotencyGuard checker = IdempotencyGuard.builder().store(store).build();
      int held = 0;
      for (String key : keys) {
        Optional<IdempotencyRecord> record = checker.find(key);
        if (record.isPresent() && record.get().state() == RecordState.IN_PROGRESS) {
          held++;
        }
      }
      checker.close();
      closer.shutdownNow();
      if (policy == dev.idempotency.TakeoverPolicy.REFUSE) {
        // strict mode: once the stray claims' leases ran out (bounded polling), a retry must send
        IdempotencyGuard strict =
            IdempotencyGuard.builder()
                .store(store)
                .lease(Duration.ofSeconds(2))
                .inFlightWait(Duration.ZERO)
                .takeoverPolicy(policy)
                .build();
        int unknown = 0;
        for (String key : keys) {
          long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
          while (true) {
            try {
              strict.execute(key, TTL, ctx -> "n_" + key);
              break;
            } catch (dev.idempotency.IdempotencyInProgressException stillHeld) {
              if (System.nanoTime() > deadline) {
                throw stillHeld;
              }
              Thread.sleep(50);
            } catch (dev.idempotency.IdempotencyOutcomeUnknownException e) {
              unknown++;
              break;
            }
          }
        }
        strict.close();
        System.out.printf(
            "QueuedClaimsAfterCloseTest[REFUSE]: %d of %d never-sent keys refused as outcome"
                + " unknown%n",
            unknown, CALLS);
        assertThat(unknown).as("never-sent keys refused as of unknown outcome").isZero();
        return;
      }
      System.out.printf(
          "QueuedClaimsAfterCloseTest: %d sends, %d of %d keys held IN_PROGRESS, problems %s%n",
          sends.get(), held, CALLS, problems);
      assertThat(sends).as("sends after close() gave up").hasValue(0);
      assertThat(problems).isEmpty();
      assertThat(held)
          .as("keys left IN_PROGRESS (held for a lease) by claims close() had given up on")
          .isZero();
    }
  }
}
