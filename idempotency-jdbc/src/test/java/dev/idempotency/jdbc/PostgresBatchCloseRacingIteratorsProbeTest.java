package dev.idempotency.jdbc;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.Batch;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.ResultCodec;
import dev.idempotency.spi.KeyStore;
import java.time.Duration;
import java.util.ArrayList;
import java.util.ConcurrentModificationException;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * {@code BatchCloseRacingIteratorsProbeTest} (core, in memory) on PostgreSQL 17 (embedded): four
 * threads iterate one batch's {@code toSend()} while another closes the guard, 100 rounds of 16
 * keys. No {@code next()} returns a key after {@code close()} returned, none is handed out twice,
 * and after {@code record()} every key sent by guard A is replayed to guard B, every other one sent
 * by B once. Passes on probeW's base 164f714 (10 to 20 s with the server's start). Tagged extended
 * for its length.
 */
@Tag("extended")
class PostgresBatchCloseRacingIteratorsProbeTest {

  static final Duration TTL = Duration.ofHours(1);
  static final int ROUNDS = 100;
  static final int KEYS = 16;
  static final int THREADS = 4;

  /** Keys guard A never handed out: the close cut their rounds short. */
  static final AtomicInteger CUT = new AtomicInteger();

  @Test
  void iteratorsRacingTheCloseHandOutNothingAfterItAndLoseNothing() throws Exception {
    List<String> problems = new CopyOnWriteArrayList<>();
    int handedOut = 0;
    try (HikariDataSource pool = SharedPostgres.pool("probew_close_race", 8);
        IdempotencyGuard guardB =
            IdempotencyGuard.builder().store(store(pool)).inFlightWait(Duration.ZERO).build()) {
      KeyStore memory = store(pool);
      for (int round = 0; round < ROUNDS && problems.isEmpty(); round++) {
        handedOut += round(memory, guardB, round, problems);
      }
    }
    assertThat(problems).as("after %s keys handed out", handedOut).isEmpty();
    assertThat(handedOut).as("keys handed out (the race ran)").isPositive();
    assertThat(CUT.get()).as("keys left unsent by the close (the race ran)").isPositive();
  }

  private static KeyStore store(HikariDataSource pool) {
    return JdbcKeyStore.builder(pool)
        .tableName("idem_probew_close_race")
        .createSchemaIfMissing(true)
        .build();
  }

  private static int round(
      KeyStore memory, IdempotencyGuard guardB, int round, List<String> problems) throws Exception {
    IdempotencyGuard guardA =
        IdempotencyGuard.builder()
            .store(memory)
            .lease(Duration.ofSeconds(10))
            .inFlightWait(Duration.ZERO)
            .closeGracePeriod(Duration.ofSeconds(5))
            .build();
    String run = UUID.randomUUID().toString();
    List<IdempotencyRequest> requests = new ArrayList<>();
    for (int k = 0; k < KEYS; k++) {
      requests.add(IdempotencyRequest.of("pg-close-race:" + round + ":" + k + ":" + run, TTL));
    }
    Batch<String> batch = guardA.claimBatch(requests, ResultCodec.string());
    Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();
    AtomicLong closeReturned = new AtomicLong(Long.MAX_VALUE);
    AtomicInteger count = new AtomicInteger();
    CountDownLatch start = new CountDownLatch(1);
    List<Thread> threads = new ArrayList<>();
    for (int t = 0; t < THREADS; t++) {
      Thread thread =
          new Thread(
              () -> {
                try {
                  start.await();
                  Iterator<Batch.Item> toSend = batch.toSend().iterator();
                  while (toSend.hasNext()) {
                    Batch.Item item;
                    try {
                      item = toSend.next();
                    } catch (NoSuchElementException | ConcurrentModificationException e) {
                      continue; // lapsed since hasNext(), or another thread took it
                    }
                    long at = System.nanoTime();
                    if (at - closeReturned.get() > 0) {
                      problems.add("round " + round + ": handed out after close(): " + item.key());
                    }
                    count.incrementAndGet();
                    if (sends
                            .computeIfAbsent(item.key(), k -> new AtomicInteger())
                            .incrementAndGet()
                        > 1) {
                      problems.add("round " + round + ": handed out twice: " + item.key());
                    }
                    batch.succeeded(item, "a-" + item.key());
                  }
                } catch (InterruptedException e) {
                  Thread.currentThread().interrupt();
                } catch (RuntimeException e) {
                  problems.add("round " + round + ": " + e);
                }
              },
              "probeW-iterator-" + t);
      thread.start();
      threads.add(thread);
    }
    Thread closer =
        new Thread(
            () -> {
              try {
                start.await();
              } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
              }
              long spinUntil = System.nanoTime() + (round % 20) * 20_000L;
              while (System.nanoTime() - spinUntil < 0) {
                Thread.onSpinWait();
              }
              guardA.close();
              closeReturned.set(System.nanoTime());
            },
            "probeW-closer");
    closer.start();
    start.countDown();
    closer.join(TimeUnit.SECONDS.toMillis(30));
    for (Thread thread : threads) {
      thread.join(TimeUnit.SECONDS.toMillis(30));
      if (thread.isAlive()) {
        problems.add("round " + round + ": an iterating thread did not end");
      }
    }
    batch.record();
    for (IdempotencyRequest request : requests) {
      String key = request.key();
      boolean sentByA = sends.containsKey(key);
      if (!sentByA) {
        CUT.incrementAndGet();
      }
      AtomicInteger bSends = new AtomicInteger();
      String answer;
      try {
        answer = guardB.execute(key, TTL, ctx -> "b-" + bSends.incrementAndGet());
      } catch (IdempotencyInProgressException e) {
        answer = "in progress";
      }
      String expected = sentByA ? "a-" + key : "b-1";
      if (!expected.equals(answer)) {
        problems.add(
            "round "
                + round
                + ": "
                + key
                + (sentByA ? " (sent by A)" : " (not sent by A)")
                + " got "
                + answer);
      }
    }
    return count.get();
  }
}
