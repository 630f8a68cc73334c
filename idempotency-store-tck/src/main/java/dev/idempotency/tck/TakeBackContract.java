package dev.idempotency.tck;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spi.StoredRecord;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The store contract's take-back ({@link dev.idempotency.spi.KeyStore#takeBack}, issue 37): a claim
 * nothing was sent under, taken back, leaves the store as if it had lapsed. A first attempt leaves
 * no record; a takeover keeps its attempt with a lease that has passed, so that the next claim
 * takes over at once and the earlier attempt, which may have sent, is never forgotten; the token
 * taken back owns nothing after it, so a late renewal, completion or release under it changes
 * nothing; a take-back under a token that no longer owns the record changes nothing. Part of {@link
 * KeyStoreContract}; extend that one.
 */
public abstract class TakeBackContract extends FindAndDeleteContract {

  @Test
  public void aFirstAttemptTakenBackLeavesNoRecord() {
    String keyId = newKeyId();
    String token = newToken();
    assertThat(store().claim(claim(keyId, token))).isEqualTo(new ClaimResult.Claimed(1, false));

    assertThat(store().takeBack(keyId, token, requestNow(Duration.ofSeconds(1)))).isTrue();

    assertThat(store().claim(claim(keyId, newToken())))
        .as("the key is free: nothing was sent under the claim taken back")
        .isEqualTo(new ClaimResult.Claimed(1, false));
  }

  @Test
  public void aTakeoverTakenBackKeepsItsAttemptWithALapsedLease() {
    String keyId = newKeyId();
    Duration lease = expiringLease();
    Duration retention = expiringRetention().plus(LONG_LEASE).plus(LONG_LEASE);
    store().claim(claim(keyId, newToken(), lease, retention));
    String takeoverToken = newToken();
    ClaimRequest takeover = claim(keyId, takeoverToken, LONG_LEASE, retention);
    assertThat(claimAfter(takeover, lease.plusMillis(1), KeyStoreContract::isClaimed))
        .isEqualTo(new ClaimResult.Claimed(2, true));
    Instant now = serverTime() ? Instant.now() : T0.plus(lease).plusMillis(1);
    Instant retentionDeadline = strictRead(keyId, now).record().retentionDeadline();

    assertThat(store().takeBack(keyId, takeoverToken, now)).isTrue();

    ClaimResult.Existing left = strictRead(keyId, now);
    assertThat(left.record().state()).isEqualTo(RecordState.IN_PROGRESS);
    assertThat(left.record().attempt()).as("the takeover's attempt is kept").isEqualTo(2);
    assertThat(left.leaseExpired()).as("its lease has passed: strict mode reports it").isTrue();
    assertThat(left.record().retentionDeadline()).isEqualTo(retentionDeadline);
    String nextToken = newToken();
    assertThat(store().claim(claim(keyId, nextToken).withNow(now)))
        .as("the next claim takes over at once, as the attempt after the one taken back")
        .isEqualTo(new ClaimResult.Claimed(3, true));

    assertThat(store().takeBack(keyId, takeoverToken, now)).as("repeated").isFalse();
    StoredRecord next = strictRead(keyId, now).record();
    assertThat(next.attempt()).isEqualTo(3);
    assertThat(strictRead(keyId, now).leaseExpired()).as("the next owner's lease").isFalse();
  }

  @Test
  public void aTakeoverTakenBackEndsItsTokenSoNoLateWriteRevivesIt() {
    String keyId = newKeyId();
    Duration lease = expiringLease();
    Duration retention = expiringRetention().plus(LONG_LEASE).plus(LONG_LEASE);
    store().claim(claim(keyId, newToken(), lease, retention));
    String takenBackToken = newToken();
    assertThat(
            claimAfter(
                claim(keyId, takenBackToken, LONG_LEASE, retention),
                lease.plusMillis(1),
                KeyStoreContract::isClaimed))
        .isEqualTo(new ClaimResult.Claimed(2, true));
    Instant now = serverTime() ? Instant.now() : T0.plus(lease).plusMillis(1);
    Instant retentionDeadline = strictRead(keyId, now).record().retentionDeadline();
    assertThat(store().takeBack(keyId, takenBackToken, now)).isTrue();

    assertThat(store().extend(extend(keyId, takenBackToken, LONG_LEASE, now)))
        .as("a renewal of the claim taken back, reaching the store after the take-back")
        .isFalse();
    assertThat(store().extendAll(List.of(extend(keyId, takenBackToken, LONG_LEASE, now))))
        .as("the same renewal in a batch")
        .containsExactly(false);
    assertThat(store().complete(complete(keyId, takenBackToken, bytes("late"))))
        .as("a completion under the token taken back")
        .isFalse();
    assertThat(store().release(keyId, takenBackToken))
        .as("a release under the token taken back")
        .isFalse();

    ClaimResult.Existing left = strictRead(keyId, now);
    assertThat(left.record().state()).isEqualTo(RecordState.IN_PROGRESS);
    assertThat(left.record().attempt()).isEqualTo(2);
    assertThat(left.leaseExpired()).as("the lease taken back stays passed").isTrue();
    assertThat(left.record().retentionDeadline()).isEqualTo(retentionDeadline);
    assertThat(store().claim(claim(keyId, newToken()).withNow(now)))
        .as("the next claim still takes over at once")
        .isEqualTo(new ClaimResult.Claimed(3, true));
  }

  @Test
  public void aTakeBackUnderATokenThatNoLongerOwnsTheRecordChangesNothing() {
    String keyId = newKeyId();
    String strayToken = newToken();
    Instant now = requestNow(Duration.ofSeconds(1));
    assertThat(store().takeBack(keyId, strayToken, now)).as("no record").isFalse();

    Duration lease = expiringLease();
    Duration retention = expiringRetention().plus(LONG_LEASE).plus(LONG_LEASE);
    store().claim(claim(keyId, strayToken, lease, retention));
    String ownerToken = newToken();
    assertThat(
            claimAfter(
                claim(keyId, ownerToken, LONG_LEASE, retention),
                lease.plusMillis(1),
                KeyStoreContract::isClaimed))
        .isEqualTo(new ClaimResult.Claimed(2, true));
    Instant later = serverTime() ? Instant.now() : T0.plus(lease).plusMillis(1);

    assertThat(store().takeBack(keyId, strayToken, later)).as("taken over since").isFalse();
    ClaimResult.Existing held = strictRead(keyId, later);
    assertThat(held.record().attempt()).isEqualTo(2);
    assertThat(held.leaseExpired()).as("the new owner's lease is untouched").isFalse();

    assertThat(store().complete(complete(keyId, ownerToken, bytes("sent")))).isTrue();
    assertThat(store().takeBack(keyId, ownerToken, later)).as("completed").isFalse();
    StoredRecord completed = strictRead(keyId, later).record();
    assertThat(completed.state()).isEqualTo(RecordState.COMPLETED);
    assertThat(completed.payload()).isEqualTo(bytes("sent"));
  }

  /** Reads the record with a strict claim, which never changes it. */
  private ClaimResult.Existing strictRead(String keyId, Instant now) {
    ClaimResult result =
        store()
            .claim(
                new ClaimRequest(
                    keyId, newToken(), "", now, LONG_LEASE, LONG_RETENTION, false, null));
    assertThat(result).isInstanceOf(ClaimResult.Existing.class);
    return (ClaimResult.Existing) result;
  }
}
