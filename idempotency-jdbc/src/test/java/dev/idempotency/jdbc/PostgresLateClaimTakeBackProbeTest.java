package dev.idempotency.jdbc;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.IdempotencyException;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.tck.ForwardingKeyStore;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * probeL: the guard's take-backs on a real PostgreSQL under contention. Four threads execute the
 * same four keys until each call returns; the first claim granted for each key is answered late
 * (held after PostgreSQL answered, longer than the 1 s lease, renewal off), so the guard refuses
 * them and takes them back (SendLease.lateClaimRefused): a first attempt deleted, a takeover
 * (another thread took the lapsed lease meanwhile) lapsed under an ended token. Every key is sent
 * exactly once. Passes.
 */
class PostgresLateClaimTakeBackProbeTest {

  private static final int THREADS = 4;
  private static final int KEYS = 4;

  @Test
  void lateClaimsTakenBackUnderContentionSendEachKeyOnce() throws Exception {
    try (HikariDataSource pool = SharedPostgres.pool("late_takeback", THREADS + 4)) {
      JdbcKeyStore postgres =
          JdbcKeyStore.builder(pool).tableName("idem_late").createSchemaIfMissing(true).build();
      AtomicInteger late = new AtomicInteger();
      java.util.Set<String> lateOnce = ConcurrentHashMap.newKeySet();
      AtomicInteger takenBackCount = new AtomicInteger();
      AtomicInteger takeBackCalls = new AtomicInteger();
      ForwardingKeyStore store =
          new ForwardingKeyStore(postgres) {
            @Override
            public ClaimResult claim(ClaimRequest request) {
              ClaimResult result = delegate.claim(request);
              if (result instanceof ClaimResult.Claimed && lateOnce.add(request.keyId())) {
                late.incrementAndGet();
                pause(1_100); // answered after the 1 s lease: the guard must not send on it
              }
              return result;
            }

            @Override
            public boolean takeBack(String keyId, String ownerToken, java.time.Instant now) {
              takeBackCalls.incrementAndGet();
              boolean takenBack = delegate.takeBack(keyId, ownerToken, now);
              if (takenBack) {
                takenBackCount.incrementAndGet();
              }
              return takenBack;
            }
          };
      Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();
      List<String> keys = new ArrayList<>();
      String run = UUID.randomUUID().toString();
      for (int i = 0; i < KEYS; i++) {
        keys.add("late-" + run + "-" + i);
        sends.put(keys.get(i), new AtomicInteger());
      }
      try (IdempotencyGuard guard =
          IdempotencyGuard.builder()
              .store(store)
              .lease(Duration.ofSeconds(1))
              .leaseRenewal(false)
              .inFlightWait(Duration.ofSeconds(3))
              .build()) {
        ExecutorService threads = Executors.newFixedThreadPool(THREADS);
        CountDownLatch start = new CountDownLatch(1);
        List<Future<Integer>> done = new ArrayList<>();
        for (int t = 0; t < THREADS; t++) {
          done.add(
              threads.submit(
                  () -> {
                    start.await();
                    int refusals = 0;
                    for (String key : keys) {
                      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
                      while (true) {
                        try {
                          guard.execute(
                              key,
                              Duration.ofHours(1),
                              ctx -> "sent " + sends.get(key).incrementAndGet());
                          break;
                        } catch (IdempotencyException refused) {
                          refusals++;
                          assertThat(System.nanoTime() - deadline)
                              .as("key %s done", key)
                              .isNegative();
                        }
                      }
                    }
                    return refusals;
                  }));
        }
        start.countDown();
        int refusals = 0;
        for (Future<Integer> f : done) {
          refusals += f.get(300, TimeUnit.SECONDS);
        }
        threads.shutdown();
        for (String key : keys) {
          assertThat(sends.get(key))
              .as(
                  "sends of %s (late claims %d, taken back %d, refusals %d)",
                  key, late.get(), takenBackCount.get(), refusals)
              .hasValue(1);
        }
        assertThat(late).as("some claims were answered late").hasPositiveValue();
        assertThat(late).hasValue(KEYS);
        System.out.printf(
            "late claims %d, take-backs %d (%d applied), refusals %d%n",
            late.get(), takeBackCalls.get(), takenBackCount.get(), refusals);
        assertThat(takeBackCalls).as("late claims were taken back").hasPositiveValue();
      }
    }
  }

  /** A store's late answer: the thing under test, not a wait for something to happen. */
  private static void pause(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
