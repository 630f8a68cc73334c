package dev.idempotency.dynamodb;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyException;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.TakeoverPolicy;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.tck.ForwardingKeyStore;
import dev.idempotency.tck.MutableClock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * Issue 40: a claim (conditional {@code PutItem}) or takeover ({@code UpdateItem}) that dynalite
 * applied but whose reply was lost or came after the attempt timeout, retried by the SDK's own
 * retry strategy. The retry fails its condition on the item the first attempt wrote; the store
 * recognises its own owner token and lease there and answers Claimed. Before the fix it read its
 * own claim as another caller's: the guard waited for itself, nobody sent, and the key stayed in
 * progress until the lease lapsed (in strict mode, for the whole window).
 */
class LostClaimReplyTest extends LostReplyStore {

  private static final Duration TTL = Duration.ofHours(1);
  private static final Duration LEASE = Duration.ofSeconds(30);

  @Override
  String tableName() {
    return "idempotency-lost-reply";
  }

  private IdempotencyGuard guard(MutableClock clock, TakeoverPolicy policy) {
    return IdempotencyGuard.builder()
        .store(store)
        .clock(clock)
        .lease(LEASE)
        .inFlightWait(Duration.ofSeconds(1))
        .takeoverPolicy(policy)
        .build();
  }

  /** Failed before the fix of issue 40: IdempotencyInProgressException, and nothing sent. */
  @Test
  void aClaimWhosePutReplyWasLostStillSendsOnce() {
    MutableClock clock = new MutableClock(Instant.now());
    String key = "lost-put:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    try (IdempotencyGuard guard = guard(clock, TakeoverPolicy.TAKE_OVER)) {
      http.loseNextReplies("PutItem", 1);
      String result = guard.execute(key, TTL, ctx -> "sent " + sends.incrementAndGet());

      assertThat(http.lost()).as("the claim's reply was lost once").isGreaterThanOrEqualTo(1);
      assertThat(result).isEqualTo("sent 1");
      assertThat(sends).hasValue(1);
    }
  }

  /**
   * Strict mode: the orphaned claim is never taken over, so a key whose message was never sent
   * stays refused (outcome unknown) for the whole window. Failed before the fix of issue 40: no
   * send at all across the call and its retry after the lease.
   */
  @Test
  void inStrictModeALostPutReplyDoesNotLoseTheSendForTheWindow() {
    MutableClock clock = new MutableClock(Instant.now());
    String key = "lost-put-strict:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    List<String> refusals = new ArrayList<>();
    try (IdempotencyGuard guard = guard(clock, TakeoverPolicy.REFUSE)) {
      http.loseNextReplies("PutItem", 1);
      for (int call = 0; call < 2; call++) {
        try {
          guard.execute(key, TTL, ctx -> "sent " + sends.incrementAndGet());
        } catch (IdempotencyException refused) {
          refusals.add(refused.getClass().getSimpleName());
        }
        clock.advance(LEASE.plusSeconds(1)); // the producer retries after the lease
      }
      assertThat(sends).as("sends (refusals: %s)", refusals).hasValue(1);
    }
  }

  /**
   * A takeover (UpdateItem) whose reply was lost: the retry fails its condition on the owner token
   * the first attempt wrote, and the store finds its own fresh lease there. Failed before the fix
   * of issue 40: IdempotencyInProgressException, and nothing sent.
   */
  @Test
  void aTakeoverWhoseReplyWasLostStillSendsOnce() {
    MutableClock clock = new MutableClock(Instant.now());
    String key = "lost-takeover:" + UUID.randomUUID();
    // a first owner that sent and crashed before its outcome was written
    ForwardingKeyStore crashing =
        new ForwardingKeyStore(store) {
          @Override
          public boolean complete(CompleteRequest request) {
            return false;
          }
        };
    try (IdempotencyGuard crashed =
        IdempotencyGuard.builder()
            .store(crashing)
            .clock(clock)
            .lease(LEASE)
            .leaseRenewal(false)
            .build()) {
      crashed.execute(key, TTL, ctx -> "first");
    }
    clock.advance(LEASE.plusSeconds(1));

    AtomicInteger sends = new AtomicInteger();
    List<Integer> attempts = new ArrayList<>();
    try (IdempotencyGuard guard = guard(clock, TakeoverPolicy.TAKE_OVER)) {
      http.loseNextReplies("UpdateItem", 1);
      String result =
          guard.execute(
              key,
              TTL,
              ctx -> {
                attempts.add(ctx.attempt());
                return "sent " + sends.incrementAndGet();
              });

      assertThat(http.lost()).isGreaterThanOrEqualTo(1);
      assertThat(result).isEqualTo("sent 1");
      assertThat(attempts).containsExactly(2);
    }
  }

  /**
   * No connection lost, only a slow reply: the claim is applied, its reply comes after the store's
   * attempt timeout, and the SDK retries it. Failed before the fix of issue 40 as the lost reply
   * does.
   */
  @Test
  void aClaimWhoseReplyCameAfterTheAttemptTimeoutStillSendsOnce() {
    MutableClock clock = new MutableClock(Instant.now());
    String key = "slow-put:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    try (DynamoDbKeyStore slowStore =
            DynamoDbKeyStore.builder(client)
                .tableName("idempotency-lost-reply")
                .operationTimeout(Duration.ofSeconds(10))
                .attemptTimeout(Duration.ofMillis(500))
                .build();
        IdempotencyGuard guard =
            IdempotencyGuard.builder()
                .store(slowStore)
                .clock(clock)
                .lease(LEASE)
                .inFlightWait(Duration.ofSeconds(1))
                .build()) {
      http.delayNextReply("PutItem", 3_000);
      String result = guard.execute(key, TTL, ctx -> "sent " + sends.incrementAndGet());

      assertThat(result).isEqualTo("sent 1");
      assertThat(sends).hasValue(1);
    }
  }

  /**
   * The same at the SPI, alone and in a batch: the store answers Existing (its own item) for a
   * claim it made. Failed before the fix of issue 40.
   */
  @Test
  void theStoreReportsItsOwnClaimAsClaimedAloneAndInABatch() {
    Instant now = Instant.now();
    ClaimRequest alone =
        new ClaimRequest(
            "alone" + UUID.randomUUID().toString().replace("-", ""),
            "owner-1",
            "",
            now,
            LEASE,
            TTL,
            true,
            null);
    http.loseNextReplies("PutItem", 1);
    ClaimResult single = store.claim(alone);

    List<ClaimRequest> batch = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      batch.add(
          new ClaimRequest(
              "batch" + i + UUID.randomUUID().toString().replace("-", ""),
              "owner-b" + i,
              "",
              now,
              LEASE,
              TTL,
              true,
              null));
    }
    http.loseNextReplies("PutItem", 1);
    List<ClaimResult> batched = store.claimAll(batch);

    org.assertj.core.api.SoftAssertions.assertSoftly(
        soft -> {
          soft.assertThat(single).as("alone").isInstanceOf(ClaimResult.Claimed.class);
          soft.assertThat(batched)
              .as("in a batch")
              .allMatch(result -> result instanceof ClaimResult.Claimed);
        });
  }
}
