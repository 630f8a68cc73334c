package dev.idempotency.jdbc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.KeyStoreException;
import dev.idempotency.TakeoverPolicy;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.tck.ForwardingKeyStore;
import dev.idempotency.tck.MutableClock;
import java.time.Duration;
import java.time.Instant;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * Issue 37 (found by probeD): core's {@code TakeBackAfterTakeoverTest} on PostgreSQL. A claim that
 * took over a lapsed lease (attempt 2) and whose answer was lost after it committed is taken back
 * by the guard. A fenced {@code DELETE} removed the record of the first owner's attempt 1, whose
 * send still runs, and the next caller claimed afresh as attempt 1 while the owner still sent (SPEC
 * 9: {@code attempt()} counts takeovers; no takeover reported). The take-back now cuts the
 * taken-over record's lease instead ({@code Statements.lapseTakeover}): the next caller takes over
 * as attempt 3.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class PostgresTakeBackAfterTakeoverTest {

  private static final Duration TTL = Duration.ofHours(1);
  private static final Duration LEASE = Duration.ofSeconds(30);

  private HikariDataSource pool;
  private JdbcKeyStore store;

  @BeforeAll
  void start() {
    pool = SharedPostgres.pool("takeback_takeover", 6);
    store =
        JdbcKeyStore.builder(pool)
            .tableName("idem_takeback_probe")
            .createSchemaIfMissing(true)
            .connectionWait(Duration.ofSeconds(30))
            .build();
  }

  @AfterAll
  void stop() {
    pool.close();
  }

  @Test
  void aTakeoverTakenBackLeavesTheNextCallerATakeoverNotAFirstAttempt() throws Exception {
    MutableClock clock = new MutableClock(Instant.now());
    AtomicInteger loseAnswers = new AtomicInteger();
    AtomicInteger releasesAnswered = new AtomicInteger();
    ForwardingKeyStore losing =
        new ForwardingKeyStore(store) {
          @Override
          public ClaimResult claim(ClaimRequest request) {
            ClaimResult result = delegate.claim(request); // committed
            if (loseAnswers.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
              throw new KeyStoreException("the claim's answer was lost", null);
            }
            return result;
          }

          @Override
          public boolean takeBack(String keyId, String ownerToken, Instant now) {
            boolean takenBack = delegate.takeBack(keyId, ownerToken, now);
            releasesAnswered.incrementAndGet();
            return takenBack;
          }
        };
    CountDownLatch ownerMayFinish = new CountDownLatch(1);
    try (IdempotencyGuard owner = guard(store, clock);
        IdempotencyGuard guard = guard(losing, clock)) {
      String key = "pg-takeback-takeover:" + UUID.randomUUID();
      AtomicInteger sends = new AtomicInteger();
      CountDownLatch ownerSending = new CountDownLatch(1);
      CompletableFuture<String> first =
          CompletableFuture.supplyAsync(
              () ->
                  owner.execute(
                      key,
                      TTL,
                      ctx -> {
                        sends.incrementAndGet();
                        ownerSending.countDown();
                        assertThat(ownerMayFinish.await(60, TimeUnit.SECONDS)).isTrue();
                        return "owner";
                      }));
      assertThat(ownerSending.await(60, TimeUnit.SECONDS)).isTrue();
      clock.advance(LEASE.plusSeconds(1)); // the owner stalled past its lease (store's view)

      loseAnswers.set(1);
      assertThatThrownBy(() -> guard.execute(key, TTL, ctx -> "retry-" + sends.incrementAndGet()))
          .isInstanceOf(KeyStoreException.class);
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (releasesAnswered.get() < 1 && System.nanoTime() < deadline) {
        TimeUnit.MILLISECONDS.sleep(20); // bounded polling for the background take-back
      }
      assertThat(releasesAnswered).as("the take-back's first release").hasPositiveValue();

      AtomicInteger nextAttempt = new AtomicInteger();
      String next =
          guard.execute(
              key,
              TTL,
              ctx -> {
                nextAttempt.set(ctx.attempt());
                return "next-" + sends.incrementAndGet();
              });
      boolean ownerStillSending = !first.isDone();
      ownerMayFinish.countDown();
      first.get(60, TimeUnit.SECONDS);

      assertThat(ownerStillSending).isTrue();
      assertThat(nextAttempt)
          .as(
              "attempt() of a send while attempt 1 still runs, after a takeover was taken back"
                  + " (SPEC 9: counts takeovers; result %s, sends %d)",
              next, sends.get())
          .hasValue(3);
    } finally {
      ownerMayFinish.countDown();
    }
  }

  private static IdempotencyGuard guard(dev.idempotency.spi.KeyStore store, MutableClock clock) {
    return IdempotencyGuard.builder()
        .store(store)
        .clock(clock)
        .lease(LEASE)
        .inFlightWait(Duration.ZERO)
        .takeoverPolicy(TakeoverPolicy.TAKE_OVER)
        .closeGracePeriod(Duration.ofSeconds(5))
        .build();
  }
}
