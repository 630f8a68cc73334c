package dev.idempotency.tck;

import static java.time.Duration.ZERO;
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
 * The time-dependent part of {@link KeyStoreContract}: leases that expire and are taken over, and
 * windows that end (the fenced renewal itself is {@link LeaseRenewalContract}). Extend {@link
 * KeyStoreContract}, which includes these tests, rather than this class.
 */
public abstract class LeaseAndWindowContract extends LeaseRenewalContract {

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

  /**
   * A renewal near the end of the window moves the record's end with the lease: a record never ends
   * under a live owner's lease, whose sender may outlive the window itself.
   */
  @Test
  public void extendPastTheWindowMovesTheRecordsEndWithTheLease() {
    String keyId = newKeyId();
    String token = newToken();
    Duration retention = Duration.ofHours(1);
    store().claim(claim(keyId, token, LONG_LEASE, retention));

    assertThat(store().extend(extend(keyId, token, Duration.ofDays(2), requestNow(ZERO)))).isTrue();
    StoredRecord record = existing(store().claim(claim(keyId, newToken(), LONG_LEASE, retention)));

    assertThat(record.leaseDeadline())
        .as("the lease is as long as asked")
        .isAfter(record.createdAt().plus(Duration.ofDays(1)));
    assertThat(record.retentionDeadline())
        .as("the record lives at least as long as the lease")
        .isAfterOrEqualTo(record.leaseDeadline());
  }

  /**
   * An owner whose clock has run ahead past its record's end (an NTP step, on a store that runs on
   * the clients' clocks) still renews the record while it is its own: the owner token is the fence,
   * and a renewal it loses to its own clock would let another process take over a live send.
   */
  @Test
  public void anOwnerWhoseClockRanPastItsWindowStillRenewsItsOwnRecord() {
    String keyId = newKeyId();
    String token = newToken();
    Duration retention = Duration.ofHours(1);
    store().claim(claim(keyId, token, LONG_LEASE, retention));

    String batchKeyId = newKeyId();
    String batchToken = newToken();
    store().claim(claim(batchKeyId, batchToken, LONG_LEASE, retention));
    Instant ahead = requestNow(retention.plusMinutes(1));

    boolean extended = store().extend(extend(keyId, token, LONG_LEASE, ahead));
    List<Boolean> extendedInABatch =
        store()
            .extendAll(
                List.of(
                    extend(batchKeyId, batchToken, LONG_LEASE, ahead),
                    extend(newKeyId(), newToken(), LONG_LEASE, ahead)));
    ClaimResult other =
        store().claim(claim(keyId, newToken(), LONG_LEASE, retention).withNow(requestNow(ZERO)));

    assertThat(extended)
        .as("the owner's renewal is fenced by its token, not by its clock")
        .isTrue();
    assertThat(extendedInABatch).as("in a batch of renewals too").containsExactly(true, false);
    assertThat(other).isInstanceOf(ClaimResult.Existing.class);
    assertThat(existing(other).state()).isEqualTo(RecordState.IN_PROGRESS);
    assertThat(((ClaimResult.Existing) other).leaseExpired()).isFalse();
    assertThat(store().complete(complete(keyId, token, bytes("ours")))).isTrue();
  }

  /**
   * An owner that keeps renewing keeps its record past the end of the window: a second claim then
   * finds it in progress rather than claiming the key afresh, and the owner's outcome is written.
   */
  @Test
  public void renewalKeepsTheRecordAlivePastTheWindow() {
    String keyId = newKeyId();
    String token = newToken();
    Duration retention = serverTime() ? Duration.ofMillis(2000) : Duration.ofHours(1);
    Duration lease = serverTime() ? Duration.ofMillis(1500) : Duration.ofMinutes(10);
    long start = System.nanoTime();
    store().claim(claim(keyId, token, lease, retention));

    if (serverTime()) {
      // renew as the guard's keeper would, until well past the window on the server's clock
      Duration pastTheWindow = retention.plusMillis(500);
      do {
        assertThat(store().extend(extend(keyId, token, lease, Instant.now()))).isTrue();
        pause(200);
      } while (System.nanoTime() - start < pastTheWindow.toNanos());
    } else {
      assertThat(store().extend(extend(keyId, token, lease, requestNow(retention.minusMinutes(5)))))
          .isTrue();
    }
    ClaimResult second =
        store()
            .claim(
                claim(keyId, newToken(), lease, retention)
                    .withNow(requestNow(retention.plusMinutes(1))));

    assertThat(second)
        .as("the window has passed, the owner's lease has not")
        .isNotEqualTo(new ClaimResult.Claimed(1, false));
    assertThat(((ClaimResult.Existing) second).leaseExpired()).isFalse();
    assertThat(existing(second).state()).isEqualTo(RecordState.IN_PROGRESS);
    assertThat(store().complete(complete(keyId, token, bytes("late but ours")))).isTrue();
    assertThat(
            existing(
                    store()
                        .claim(
                            claim(keyId, newToken(), lease, retention)
                                .withNow(requestNow(retention.plusMinutes(2)))))
                .payload())
        .isEqualTo(bytes("late but ours"));
  }

  /** A takeover near the end of the window gets a whole lease, and the record lives as long. */
  @Test
  public void takeoverNearTheWindowsEndGetsAWholeLease() {
    String keyId = newKeyId();
    Duration lease = serverTime() ? Duration.ofMillis(300) : LONG_LEASE;
    Duration retention = serverTime() ? Duration.ofMillis(3000) : Duration.ofHours(1);
    Duration takeoverLease = serverTime() ? Duration.ofMillis(2000) : Duration.ofMinutes(20);
    long start = System.nanoTime();
    store().claim(claim(keyId, newToken(), lease, retention));

    ClaimRequest takeover = claim(keyId, newToken(), takeoverLease, retention.multipliedBy(2));
    ClaimResult taken;
    if (serverTime()) {
      awaitElapsed(start, retention.minusMillis(1000));
      taken = claimAfter(takeover, ZERO, KeyStoreContract::isClaimed);
    } else {
      taken = store().claim(takeover.withNow(T0.plus(retention).minus(Duration.ofMinutes(5))));
    }
    StoredRecord record = existing(store().claim(claim(keyId, newToken())));

    assertThat(taken).isEqualTo(new ClaimResult.Claimed(2, true));
    assertThat(record.leaseDeadline())
        .as("a whole lease, past the window's end")
        .isAfter(record.createdAt().plus(retention));
    assertThat(record.retentionDeadline())
        .as("the record lives at least as long as the lease")
        .isAfterOrEqualTo(record.leaseDeadline());
  }

  @Test
  public void takeoverLeaseNeverOutlivesTheRecord() {
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
    assertThat(record.retentionDeadline())
        .as("the record lives at least as long as the takeover's lease")
        .isAfterOrEqualTo(record.leaseDeadline());
  }
}
