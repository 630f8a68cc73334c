package dev.idempotency.dynamodb;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyException;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.tck.MutableClock;
import java.time.Duration;
import java.time.Instant;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * Issue 40: a lease renewal that ends past the window is the second form of {@code extend} ({@code
 * SET lease, retain_until = :lease}). If dynalite applies it and the reply is lost, the SDK retries
 * it; the retry must meet its condition again and the store answer true. Before the fix the
 * condition was {@code retain_until < :lease}, the retry failed it on the item the first attempt
 * wrote, and the store answered false: the guard believed its live claim lost, stopped renewing it,
 * and another caller took it over while the first still sent.
 */
class LostRenewalReplyTest extends LostReplyStore {

  private static final Duration LEASE = Duration.ofSeconds(2);
  private static final Duration TTL = Duration.ofSeconds(3);

  /** The update of the renewal that moves the window's end (DynamoDbWrites.extend). */
  private static final String SECOND_FORM = "#retain_until = :lease";

  @Override
  String tableName() {
    return "idempotency-lost-renewal";
  }

  /**
   * Failed before the fix of issue 40: extend answers false, the lease it wrote notwithstanding.
   */
  @Test
  void aRenewalPastTheWindowWhoseReplyWasLostIsStillARenewal() {
    Instant t0 = Instant.ofEpochMilli(System.currentTimeMillis());
    String keyId = "renew" + UUID.randomUUID().toString().replace("-", "");
    assertThat(store.claim(new ClaimRequest(keyId, "owner", "", t0, LEASE, TTL, true, null)))
        .isInstanceOf(ClaimResult.Claimed.class);
    Instant later = t0.plusMillis(1_500); // the new lease (t0 + 3.5 s) ends past the window

    http.loseNextReplyTo(SECOND_FORM);
    boolean renewed = store.extend(new ExtendRequest(keyId, "owner", LEASE, later));

    assertThat(http.lost()).isGreaterThanOrEqualTo(1);
    assertThat(store.find(keyId, later).orElseThrow().leaseDeadline())
        .as("dynalite holds the renewed lease")
        .isEqualTo(later.plus(LEASE));
    assertThat(renewed).as("extend's answer for a lease it did renew").isTrue();
  }

  /**
   * What the false answer costs: the guard stops renewing a live send, and a repeat after the lease
   * it would have renewed takes the key over and sends again. Failed before the fix of issue 40
   * with two sends.
   */
  @Test
  void aLostRenewalReplyDoesNotLetARepeatSendAgainWhileTheFirstStillSends() throws Exception {
    MutableClock clock = new MutableClock(Instant.now());
    String key = "lost-renewal:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    CountDownLatch repeatDone = new CountDownLatch(1);
    java.util.concurrent.atomic.AtomicReference<String> refusal =
        new java.util.concurrent.atomic.AtomicReference<>();
    try (IdempotencyGuard first =
            IdempotencyGuard.builder().store(store).clock(clock).lease(LEASE).build();
        IdempotencyGuard repeat =
            IdempotencyGuard.builder()
                .store(store)
                .clock(clock)
                .lease(LEASE)
                .inFlightWait(Duration.ofMillis(200))
                .build()) {
      CompletableFuture<String> running =
          CompletableFuture.supplyAsync(
              () ->
                  first.execute(
                      key,
                      TTL,
                      ctx -> {
                        sends.incrementAndGet();
                        int lostBefore = http.lost();
                        http.loseNextReplyTo(SECOND_FORM);
                        clock.advance(Duration.ofMillis(1_500)); // the next renewal ends past TTL
                        awaitUntil(() -> http.lost() > lostBefore, 30);
                        // the keeper renews every quarter lease (0.5 s), one or two requests a
                        // round: a claim it still holds is renewed again at t0 + 2.5 s, to
                        // t0 + 4.5 s. Four more requests (the lost one's retry, two rounds) mean
                        // that renewal was answered; a claim it dropped makes none.
                        clock.advance(Duration.ofMillis(1_000));
                        int updates = http.sent("UpdateItem");
                        awaitUntil(() -> http.sent("UpdateItem") >= updates + 4, 10);
                        clock.advance(Duration.ofMillis(1_000)); // t0 + 3.5 s: past the lost lease
                        try {
                          repeat.execute(key, TTL, again -> "sent " + sends.incrementAndGet());
                        } catch (IdempotencyException expected) {
                          // in progress: the first still holds the key
                          refusal.set(expected.getClass().getSimpleName());
                        }
                        repeatDone.countDown();
                        return "first";
                      }));
      running.get(2, TimeUnit.MINUTES);
      assertThat(repeatDone.getCount()).isZero();
      assertThat(sends)
          .as("sends while the first call was still sending (repeat refused: %s)", refusal)
          .hasValue(1);
    }
  }

  private static void awaitUntil(java.util.function.BooleanSupplier condition, int seconds) {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
    while (!condition.getAsBoolean() && System.nanoTime() < deadline) {
      java.util.concurrent.locks.LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(20));
    }
  }
}
