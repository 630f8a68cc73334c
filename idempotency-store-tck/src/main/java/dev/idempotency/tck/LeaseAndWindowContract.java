package dev.idempotency.tck;

import static java.time.Duration.ZERO;
import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spi.StoredRecord;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The time-dependent part of {@link KeyStoreContract}: leases that expire and are taken over,
 * windows that end, and the fenced lease renewal ({@code extend}). Extend {@link KeyStoreContract},
 * which includes these tests, rather than this class.
 */
public abstract class LeaseAndWindowContract extends StoreContractSupport {

  @Test
  public void expiredLeaseIsTakenOverWithTheNextAttemptAndFencesTheOldOwner() {
    String keyId = newKeyId();
    String oldToken = newToken();
    Duration lease = expiringLease();
    store().claim(claim(keyId, oldToken, lease, expiringRetention().plus(LONG_LEASE)));

    String newOwner = newToken();
    ClaimResult takeover =
        claimAfter(
            claim(keyId, newOwner, lease, expiringRetention().plus(LONG_LEASE)),
            lease.plusMillis(1),
            KeyStoreContract::isClaimed);

    assertThat(takeover).isEqualTo(new ClaimResult.Claimed(2, true));
    assertThat(store().complete(complete(keyId, oldToken, bytes("late")))).isFalse();
    assertThat(store().release(keyId, oldToken)).isFalse();
    assertThat(store().complete(complete(keyId, newOwner, bytes("winner")))).isTrue();
    StoredRecord record = existing(store().claim(claim(keyId, newToken())));
    assertThat(record.payload()).isEqualTo(bytes("winner"));
    assertThat(record.attempt()).isEqualTo(2);
  }

  @Test
  public void takeoverKeepsTheRetentionDeadline() {
    String keyId = newKeyId();
    Duration lease = expiringLease();
    Duration retention = expiringRetention().plus(LONG_LEASE);
    store().claim(claim(keyId, newToken(), lease, retention));
    Instant originalDeadline =
        existing(store().claim(claim(keyId, newToken()))).retentionDeadline();

    claimAfter(
        claim(keyId, newToken(), lease, retention),
        lease.plusMillis(1),
        KeyStoreContract::isClaimed);

    assertThat(existing(store().claim(claim(keyId, newToken()))).retentionDeadline())
        .isEqualTo(originalDeadline);
  }

  @Test
  public void strictClaimDoesNotTakeOverAnExpiredLeaseButReportsIt() {
    String keyId = newKeyId();
    Duration lease = expiringLease();
    store().claim(claim(keyId, newToken(), lease, expiringRetention().plus(LONG_LEASE)));
    ClaimRequest strict =
        new ClaimRequest(
            keyId, newToken(), "", T0, lease, expiringRetention().plus(LONG_LEASE), false, null);

    ClaimResult result =
        claimAfter(
            strict,
            lease.plusMillis(1),
            r -> r instanceof ClaimResult.Existing e && e.leaseExpired());

    assertThat(result).isInstanceOf(ClaimResult.Existing.class);
    assertThat(((ClaimResult.Existing) result).leaseExpired()).isTrue();
    assertThat(existing(result).attempt()).isEqualTo(1);
  }

  @Test
  public void expiredLeaseIsNotTakenOverWithADifferentFingerprint() {
    String keyId = newKeyId();
    Duration lease = expiringLease();
    Duration retention = expiringRetention().plus(LONG_LEASE);
    store().claim(new ClaimRequest(keyId, newToken(), "fp-a", T0, lease, retention, true, null));
    ClaimRequest other =
        new ClaimRequest(keyId, newToken(), "fp-b", T0, lease, retention, true, null);

    ClaimResult result =
        claimAfter(
            other,
            lease.plusMillis(1),
            r -> r instanceof ClaimResult.Existing e && e.leaseExpired());

    assertThat(existing(result).fingerprint()).isEqualTo("fp-a");
    assertThat(((ClaimResult.Existing) result).leaseExpired()).isTrue();
  }

  @Test
  public void recordPastRetentionCountsAsAbsent() {
    String keyId = newKeyId();
    String token = newToken();
    Duration lease = expiringLease();
    Duration retention = expiringRetention();
    store().claim(claim(keyId, token, lease, retention));
    store().complete(complete(keyId, token, bytes("old")));

    ClaimResult result =
        claimAfter(
            claim(keyId, newToken(), lease, retention), retention, KeyStoreContract::isClaimed);

    assertThat(result).isEqualTo(new ClaimResult.Claimed(1, false));
  }

  // ---- extend: the fenced lease renewal the guard's keeper sends while a sender runs.

  @Test
  public void extendWithTheOwnerTokenKeepsTheClaimPastItsFirstLease() {
    String keyId = newKeyId();
    String token = newToken();
    Duration lease = expiringLease();
    long start = System.nanoTime();
    store().claim(claim(keyId, token, lease, LONG_RETENTION));

    boolean extended =
        store()
            .extend(extend(keyId, token, lease.multipliedBy(10), requestNow(lease.dividedBy(2))));
    if (serverTime()) {
      awaitElapsed(start, lease.multipliedBy(2));
    }
    ClaimResult later =
        store().claim(claim(keyId, newToken()).withNow(requestNow(lease.multipliedBy(2))));

    assertThat(extended).isTrue();
    assertThat(later).isInstanceOf(ClaimResult.Existing.class);
    assertThat(((ClaimResult.Existing) later).leaseExpired())
        .as("the renewed lease has not passed")
        .isFalse();
    assertThat(existing(later).attempt()).isEqualTo(1);
    assertThat(store().complete(complete(keyId, token, bytes("renewed")))).isTrue();
  }

  @Test
  public void extendWithAStaleTokenIsRefusedAndTheLeaseStillRunsOut() {
    String keyId = newKeyId();
    Duration lease = expiringLease();
    store().claim(claim(keyId, newToken(), lease, LONG_RETENTION));

    boolean extended = store().extend(extend(keyId, newToken(), LONG_LEASE, requestNow(ZERO)));
    ClaimResult takeover =
        claimAfter(
            claim(keyId, newToken(), lease, LONG_RETENTION),
            lease.plusMillis(1),
            KeyStoreContract::isClaimed);

    assertThat(extended).isFalse();
    assertThat(takeover).isEqualTo(new ClaimResult.Claimed(2, true));
  }

  @Test
  public void extendAfterATakeoverIsRefusedForTheOldOwner() {
    String keyId = newKeyId();
    String oldToken = newToken();
    Duration lease = expiringLease();
    store().claim(claim(keyId, oldToken, lease, LONG_RETENTION));
    String newOwner = newToken();
    claimAfter(
        claim(keyId, newOwner, lease, LONG_RETENTION),
        lease.plusMillis(1),
        KeyStoreContract::isClaimed);

    assertThat(
            store().extend(extend(keyId, oldToken, LONG_LEASE, requestNow(lease.multipliedBy(2)))))
        .isFalse();
    assertThat(
            store().extend(extend(keyId, newOwner, LONG_LEASE, requestNow(lease.multipliedBy(2)))))
        .isTrue();
  }

  @Test
  public void extendOfACompletedReleasedOrAbsentRecordIsRefusedAndBringsNothingBack() {
    String completed = newKeyId();
    String completedToken = newToken();
    store().claim(claim(completed, completedToken));
    store().complete(complete(completed, completedToken, bytes("done")));
    String released = newKeyId();
    String releasedToken = newToken();
    store().claim(claim(released, releasedToken));
    store().release(released, releasedToken);
    String absent = newKeyId();

    assertThat(store().extend(extend(completed, completedToken, LONG_LEASE, requestNow(ZERO))))
        .isFalse();
    assertThat(store().extend(extend(released, releasedToken, LONG_LEASE, requestNow(ZERO))))
        .isFalse();
    assertThat(store().extend(extend(absent, newToken(), LONG_LEASE, requestNow(ZERO)))).isFalse();
    assertThat(existing(store().claim(claim(completed, newToken()))).state())
        .isEqualTo(RecordState.COMPLETED);
    assertThat(store().claim(claim(released, newToken())))
        .isEqualTo(new ClaimResult.Claimed(1, false));
    assertThat(store().claim(claim(absent, newToken())))
        .isEqualTo(new ClaimResult.Claimed(1, false));
  }

  @Test
  public void extendNeverMovesTheLeasePastTheWindow() {
    String keyId = newKeyId();
    String token = newToken();
    Duration retention = Duration.ofHours(1);
    store().claim(claim(keyId, token, LONG_LEASE, retention));

    assertThat(store().extend(extend(keyId, token, Duration.ofDays(2), requestNow(ZERO)))).isTrue();
    StoredRecord record = existing(store().claim(claim(keyId, newToken(), LONG_LEASE, retention)));

    assertThat(record.leaseDeadline()).isBeforeOrEqualTo(record.retentionDeadline());
    assertThat(record.retentionDeadline())
        .as("the window is not moved")
        .isEqualTo(record.createdAt().plus(retention));
  }

  @Test
  public void takeoverLeaseNeverOutlivesTheWindow() {
    String keyId = newKeyId();
    Duration lease = expiringLease();
    Duration retention = expiringRetention().plus(lease);
    store().claim(claim(keyId, newToken(), lease, retention));

    Duration longTakeoverLease = retention.multipliedBy(10);
    claimAfter(
        new ClaimRequest(
            keyId, newToken(), "", T0, longTakeoverLease, retention.multipliedBy(20), true, null),
        lease.plusMillis(1),
        KeyStoreContract::isClaimed);
    StoredRecord record = existing(store().claim(claim(keyId, newToken())));

    assertThat(record.attempt()).isEqualTo(2);
    assertThat(record.leaseDeadline())
        .as("a takeover's lease is capped at the record's window")
        .isBeforeOrEqualTo(record.retentionDeadline());
  }

  @Test
  public void extendAllIsFencedPerKey() {
    List<ExtendRequest> renewals = new ArrayList<>();
    for (int i = 0; i < 10; i++) {
      String keyId = newKeyId();
      String token = newToken();
      store().claim(claim(keyId, token));
      renewals.add(extend(keyId, i % 2 == 0 ? token : newToken(), LONG_LEASE, requestNow(ZERO)));
    }

    List<Boolean> extended = store().extendAll(renewals);

    for (int i = 0; i < 10; i++) {
      assertThat(extended.get(i)).as("key %d", i).isEqualTo(i % 2 == 0);
    }
  }
}
