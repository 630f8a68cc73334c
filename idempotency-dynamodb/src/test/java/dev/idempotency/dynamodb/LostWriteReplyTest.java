package dev.idempotency.dynamodb;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.ResultCodec;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.RecordState;
import java.time.Duration;
import java.time.Instant;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * The writes after a claim whose reply dynalite sent and the test lost, so that the SDK retried a
 * request that had been applied: complete and release (which held before issue 40's fixes), and
 * forget, which answered false for a record it had deleted.
 */
class LostWriteReplyTest extends LostReplyStore {

  private static final Duration TTL = Duration.ofHours(1);

  @Override
  String tableName() {
    return "idempotency-lost-reply";
  }

  @Test
  void aCompletionWhoseReplyWasLostIsReplayed() {
    try (IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build()) {
      AtomicInteger sends = new AtomicInteger();
      String key = "lost-complete:" + UUID.randomUUID();
      int lostBefore = http.lost();
      http.loseNextReplies("UpdateItem", 1);
      assertThat(guard.execute(key, TTL, ctx -> "sent " + sends.incrementAndGet()))
          .isEqualTo("sent 1");
      assertThat(http.lost()).isEqualTo(lostBefore + 1);
      assertThat(
              guard
                  .executeForOutcome(
                      IdempotencyRequest.of(key, TTL), ResultCodec.string(), ctx -> "again")
                  .replayed())
          .isTrue();
      String empty = "lost-complete-empty:" + UUID.randomUUID();
      http.loseNextReplies("UpdateItem", 1);
      assertThat(guard.execute(empty, TTL, ctx -> "")).isEmpty();
      assertThat(guard.execute(empty, TTL, ctx -> "x")).isEmpty();
      assertThat(sends).hasValue(1);
    }
  }

  @Test
  void aReleaseWhoseReplyWasLostLetsTheRetrySend() {
    try (IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build()) {
      String key = "lost-release:" + UUID.randomUUID();
      int lostBefore = http.lost();
      http.loseNextReplies("DeleteItem", 1);
      assertThatThrownBy(
              () ->
                  guard.execute(
                      key,
                      TTL,
                      ctx -> {
                        throw new IllegalStateException("provider down");
                      }))
          .isInstanceOf(IllegalStateException.class);
      assertThat(http.lost()).isEqualTo(lostBefore + 1);
      assertThat(guard.execute(key, TTL, ctx -> "retried")).isEqualTo("retried");
    }
  }

  /** Failed before the fix of issue 40: the store answered false for the record it deleted. */
  @Test
  void aForgetWhoseDeleteReplyWasLostSaysItDeleted() {
    Instant now = Instant.now();
    String keyId = "forget" + UUID.randomUUID().toString().replace("-", "");
    assertThat(
            store.claim(
                new ClaimRequest(keyId, "owner", "", now, Duration.ofMinutes(1), TTL, true, null)))
        .isInstanceOf(ClaimResult.Claimed.class);
    assertThat(
            store.complete(
                new CompleteRequest(keyId, "owner", RecordState.COMPLETED, new byte[] {1}, now)))
        .isTrue();
    int lostBefore = http.lost();

    http.loseNextReplies("DeleteItem", 1);
    boolean forgotten = store.delete(keyId, now);

    assertThat(http.lost()).as("the delete's reply was lost once").isEqualTo(lostBefore + 1);
    assertThat(store.find(keyId, now)).as("dynalite deleted the record").isEmpty();
    assertThat(forgotten).as("forget's answer for a record it deleted").isTrue();
    assertThat(store.delete(keyId, now)).as("a second forget finds nothing").isFalse();
  }

  /** The same through the guard: the operator is told the resend is armed, and it is. */
  @Test
  void theGuardsForgetWithALostReplyArmsTheResend() {
    try (IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build()) {
      String key = "lost-forget:" + UUID.randomUUID();
      AtomicInteger sends = new AtomicInteger();
      assertThat(guard.execute(key, TTL, ctx -> "sent " + sends.incrementAndGet()))
          .isEqualTo("sent 1");

      http.loseNextReplies("DeleteItem", 1);
      assertThat(guard.forget(key)).isTrue();

      assertThat(guard.execute(key, TTL, ctx -> "sent " + sends.incrementAndGet()))
          .isEqualTo("sent 2");
    }
  }
}
