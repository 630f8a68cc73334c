package dev.idempotency.dynamodb;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import java.time.Duration;
import java.time.Instant;
import java.util.UUID;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * probeL (open finding, low severity: a wrong answer, no duplicate send and no key held): a
 * take-back whose request dynalite applied but whose reply was lost, so that the SDK retried it,
 * answers {@code false} ("not ours") for a claim it did take back. The retry meets the condition
 * its own first attempt falsified (the item deleted, or its owner token ended), and
 * DynamoDbWrites.takeBack reads a failed condition as "not ours" without looking at what is stored,
 * unlike complete (reads the item back) and delete (issue 40's fix for forget). The store is left
 * right (the key free, or the takeover lapsed); only the answer is wrong: BatchWriter then counts
 * no release and emits no RELEASED event for the key, UnsentClaims logs nothing. On
 * KeyStore.takeBack's contract ("false for a key it does not hold"), the store did hold it.
 */
@Tag("open-finding")
class TakeBackLostReplyProbeTest extends LostReplyStore {

  private static final Duration TTL = Duration.ofHours(1);

  @Override
  String tableName() {
    return "idempotency-takeback-lost-reply";
  }

  @Test
  void aFirstAttemptTakeBackWhoseReplyWasLostSaysItTookItBack() {
    Instant now = Instant.now();
    String keyId = "takeback" + UUID.randomUUID().toString().replace("-", "");
    assertThat(store.claim(request(keyId, "owner", now, Duration.ofMinutes(10))))
        .isEqualTo(new ClaimResult.Claimed(1, false));
    int lostBefore = http.lost();

    http.loseNextReplies("DeleteItem", 1);
    boolean takenBack = store.takeBack(keyId, "owner", now);

    assertThat(http.lost()).as("the delete's reply was lost once").isEqualTo(lostBefore + 1);
    assertThat(store.find(keyId, now)).as("dynalite deleted the record").isEmpty();
    assertThat(takenBack).as("takeBack's answer for a claim it took back").isTrue();
  }

  @Test
  void aTakeoverTakeBackWhoseReplyWasLostSaysItTookItBack() {
    Instant now = Instant.now();
    String keyId = "takeback" + UUID.randomUUID().toString().replace("-", "");
    assertThat(store.claim(request(keyId, "first", now, Duration.ofSeconds(1))))
        .isEqualTo(new ClaimResult.Claimed(1, false));
    Instant later = now.plusSeconds(2);
    assertThat(store.claim(request(keyId, "second", later, Duration.ofMinutes(10))))
        .isEqualTo(new ClaimResult.Claimed(2, true));
    int lostBefore = http.lost();

    http.loseNextReplies("UpdateItem", 1);
    boolean takenBack = store.takeBack(keyId, "second", later);

    assertThat(http.lost()).as("the update's reply was lost once").isEqualTo(lostBefore + 1);
    assertThat(store.claim(request(keyId, "third", later, Duration.ofMinutes(10))))
        .as("dynalite took the takeover back: the next claim takes over")
        .isEqualTo(new ClaimResult.Claimed(3, true));
    assertThat(takenBack).as("takeBack's answer for a claim it took back").isTrue();
  }

  private static ClaimRequest request(String keyId, String token, Instant now, Duration lease) {
    return new ClaimRequest(keyId, token, "", now, lease, TTL, true, null);
  }
}
