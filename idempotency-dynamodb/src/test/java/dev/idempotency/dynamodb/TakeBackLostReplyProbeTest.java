package dev.idempotency.dynamodb;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import java.time.Duration;
import java.time.Instant;
import java.util.UUID;
import org.junit.jupiter.api.Test;

/**
 * probeL's finding (low severity: a wrong answer, no duplicate send and no key held), fixed: a
 * take-back whose request dynalite applied but whose reply was lost, so that the SDK retried it,
 * answered {@code false} ("not ours") for a claim it did take back. The retry met the condition its
 * own first attempt falsified (the item deleted, or its owner token ended), and
 * DynamoDbTakeBack.takeBack read a failed condition as "not ours" without looking at what is
 * stored, unlike complete (reads the item back) and delete (issue 40's fix for forget). The store
 * was left right; only the answer was wrong: BatchWriter then counted no release and emitted no
 * RELEASED event for the key. The take-back now reads the item first and recognises its own write
 * in the item that refused the retry (the record read gone; the fresh owner token it wrote). All
 * three failed before the fix ({@code false}).
 */
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

  @Test
  void aTakeBackOfALapsedTakeoverWhoseReplyWasLostSaysItTookItBack() {
    Instant now = Instant.now();
    String keyId = "takeback" + UUID.randomUUID().toString().replace("-", "");
    assertThat(store.claim(request(keyId, "first", now, Duration.ofSeconds(1))))
        .isEqualTo(new ClaimResult.Claimed(1, false));
    Instant later = now.plusSeconds(2);
    assertThat(store.claim(request(keyId, "second", later, Duration.ofSeconds(1))))
        .isEqualTo(new ClaimResult.Claimed(2, true));
    Instant lapsed = later.plusSeconds(5); // the takeover's lease ended at later + 1 s
    int lostBefore = http.lost();

    http.loseNextReplies("UpdateItem", 1);
    boolean takenBack = store.takeBack(keyId, "second", lapsed);

    assertThat(http.lost()).as("the update's reply was lost once").isEqualTo(lostBefore + 1);
    assertThat(store.claim(request(keyId, "third", lapsed, Duration.ofMinutes(10))))
        .as("dynalite took the takeover back: the next claim takes over")
        .isEqualTo(new ClaimResult.Claimed(3, true));
    assertThat(takenBack).as("takeBack's answer for a claim it took back").isTrue();
  }

  private static ClaimRequest request(String keyId, String token, Instant now, Duration lease) {
    return new ClaimRequest(keyId, token, "", now, lease, TTL, true, null);
  }
}
