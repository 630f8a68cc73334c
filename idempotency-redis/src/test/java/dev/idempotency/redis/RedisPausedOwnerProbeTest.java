package dev.idempotency.redis;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyEvent;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.testservers.Poll;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * probeB, suspicion 3 (SPEC 1): Redis stalls ({@code CLIENT PAUSE} 3 s, mode ALL, three leases of 1
 * s) after guard A's claim; guard B claims the key once Redis goes on. Two moments: A's send has
 * returned before the pause and its outcome write waits in Redis's queue; or A's send runs across
 * the whole pause (its keeper's renewals wait in the queue). Everything A sent during the pause
 * timed out on A's side (operation timeout 500 ms) and is run by Redis when the pause ends, in the
 * order sent, before B's claim, which is sent after the pause.
 *
 * <p>Warm (every script of the scenario already in Redis's script cache): A's queued outcome write
 * (or renewal) runs as the pause ends, B replays A's result: one send. Passes; regular tests.
 *
 * <p>Cold (the script cache flushed before the scenario, as after a Redis restart or failover): A's
 * queued {@code EVALSHA} is answered {@code NOSCRIPT} when the pause ends, and the {@code EVAL}
 * that follows it (Scripts.run) is sent only then, after the operation gave up, behind B's claim. B
 * takes the lapsed key over (attempt 2) and sends again with the same provider key; A's caller got
 * its result with OUTCOME_NOT_RECORDED, A's late outcome is refused by the token fence and never
 * overwrites B's record; the replay is B's. CONFIRMED on probeB (1157db4), open finding, severity
 * low: a store away longer than the lease is the documented lease-lapse exception
 * (docs/guarantees.md: "Only a store that stays away until the lease ends [...] leaves the key as a
 * crash would"), but the same stall with a warm script cache records A's send; the cold case loses
 * it because the write reached Redis as an EVALSHA the server could not run. Failure: "[warm false,
 * ...] Expected: 1, Actual: 2" (4 of 4 runs).
 *
 * <p>fixcore: not fixed (re-sending the write as EVAL in the same connection order needs the store
 * to send every script in full, or to know the cache is cold, before the stall); documented in
 * docs/guarantees.md as part of the lease-lapse exception. The cold cases stay tagged.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class RedisPausedOwnerProbeTest {

  private static final Duration TTL = Duration.ofHours(1);
  private static final Duration LEASE = Duration.ofSeconds(1);
  private static final long PAUSE_MILLIS = 3_000;

  private StandaloneRedis redis;

  @BeforeAll
  void start() throws Exception {
    redis = StandaloneRedis.start();
  }

  @AfterAll
  void stop() throws Exception {
    redis.close();
  }

  @Test
  void anOutcomeWriteQueuedByAPausedRedisIsRunBeforeTheNextClaim() throws Exception {
    run(false, true);
  }

  @Test
  void aSendRunningAcrossAPauseLongerThanTheLeaseIsNotTakenOver() throws Exception {
    run(true, true);
  }

  @Test
  @Tag("open-finding")
  void coldScriptCacheAnOutcomeWriteQueuedByAPausedRedisIsRunBeforeTheNextClaim() throws Exception {
    run(false, false);
  }

  /**
   * Passed 3 of 3 with both stores connected before the pause (failed once, B taking over, in a
   * first version where B's store connected only after the pause): a race between A's renewal, sent
   * again as EVAL after its NOSCRIPT, and B's claim 200 ms after the pause. Kept out of the default
   * build for that reason.
   */
  @Test
  @Tag("open-finding")
  void coldScriptCacheASendRunningAcrossAPauseIsNotTakenOver() throws Exception {
    run(true, false);
  }

  private void run(boolean sendSpansThePause, boolean warm) throws Exception {
    List<IdempotencyEvent> eventsA = new CopyOnWriteArrayList<>();
    List<IdempotencyEvent> eventsB = new CopyOnWriteArrayList<>();
    try (RedisKeyStore storeA =
            RedisKeyStore.builder(redis.client()).operationTimeout(Duration.ofMillis(500)).build();
        RedisKeyStore storeB =
            RedisKeyStore.builder(redis.client()).operationTimeout(Duration.ofSeconds(2)).build();
        IdempotencyGuard guardA =
            IdempotencyGuard.builder()
                .store(storeA)
                .lease(LEASE)
                .inFlightWait(Duration.ZERO)
                .listener(eventsA::add)
                .build();
        IdempotencyGuard guardB =
            IdempotencyGuard.builder()
                .store(storeB)
                .lease(LEASE)
                .inFlightWait(Duration.ZERO)
                .listener(eventsB::add)
                .build()) {
      // both stores connected, and every script the scenario uses in Redis's script cache
      guardA.execute(
          "warm:" + UUID.randomUUID(),
          TTL,
          ctx -> {
            Thread.sleep(LEASE.toMillis());
            return "warm";
          });
      guardB.execute("warm:" + UUID.randomUUID(), TTL, ctx -> "warm");
      if (!warm) {
        redis.admin().scriptFlush(); // as after a restart or a failover
      }
      String key = "paused-owner:" + sendSpansThePause + ":" + UUID.randomUUID();
      AtomicInteger sends = new AtomicInteger();
      List<String> providerKeys = new CopyOnWriteArrayList<>();
      CountDownLatch finishSend = new CountDownLatch(1);
      java.util.concurrent.atomic.AtomicLong pausedAt =
          new java.util.concurrent.atomic.AtomicLong();
      CompletableFuture<String> a =
          CompletableFuture.supplyAsync(
              () ->
                  guardA.execute(
                      key,
                      TTL,
                      ctx -> {
                        providerKeys.add(ctx.providerKey());
                        int n = sends.incrementAndGet();
                        pausedAt.set(System.nanoTime());
                        redis.admin().clientPause(PAUSE_MILLIS); // Redis stalls from here
                        if (sendSpansThePause) {
                          finishSend.await(60, TimeUnit.SECONDS);
                        }
                        return "a-" + n + "-attempt-" + ctx.attempt();
                      }));
      // the pause ends: the test's own command waits in the queue and is answered after it
      Poll.within(Duration.ofSeconds(60))
          .every(Duration.ofMillis(200))
          .ignoring(RuntimeException.class)
          .until(
              "Redis answers again, the pause over",
              () ->
                  sends.get() == 1
                      && System.nanoTime() - pausedAt.get()
                          > TimeUnit.MILLISECONDS.toNanos(PAUSE_MILLIS + 200)
                      && isPong(),
              ok -> ok);
      String b;
      try {
        b =
            guardB.execute(
                key,
                TTL,
                ctx -> {
                  providerKeys.add(ctx.providerKey());
                  return "b-" + sends.incrementAndGet() + "-attempt-" + ctx.attempt();
                });
      } catch (IdempotencyInProgressException inProgress) {
        b = "in progress";
      }
      finishSend.countDown();
      String aGot = a.get(60, TimeUnit.SECONDS);
      String replay =
          Poll.within(Duration.ofSeconds(30))
              .every(Duration.ofMillis(100))
              .ignoring(IdempotencyInProgressException.class)
              .until(
                  "a replay",
                  () -> guardB.execute(key, TTL, ctx -> "late-" + sends.incrementAndGet()),
                  r -> true);
      String what =
          "warm "
              + warm
              + ", provider keys "
              + providerKeys
              + ", A got "
              + aGot
              + ", B got "
              + b
              + ", the replay "
              + replay
              + "; A's events "
              + types(eventsA)
              + ", B's "
              + types(eventsB);
      assertThat(providerKeys)
          .as("one provider key for every send (%s)", what)
          .hasSize(sends.get());
      assertThat(providerKeys.stream().distinct()).as(what).hasSize(1);
      assertThat(replay)
          .as("the replay is the last send's result, never overwritten (%s)", what)
          .isEqualTo(sends.get() == 1 ? aGot : b);
      assertThat(sends).as(what).hasValue(1);
    }
  }

  private boolean isPong() {
    return "PONG".equals(redis.admin().ping());
  }

  private static List<IdempotencyEvent.Type> types(List<IdempotencyEvent> events) {
    return events.stream().map(IdempotencyEvent::type).toList();
  }
}
