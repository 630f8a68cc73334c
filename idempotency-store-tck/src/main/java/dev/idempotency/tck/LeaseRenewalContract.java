package dev.idempotency.tck;

import static java.time.Duration.ZERO;
import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.RecordState;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The fenced lease renewal of {@link KeyStoreContract} ({@code extend} and {@code extendAll}): what
 * the guard's keeper sends while a sender runs. Only the owner's token renews, a renewal never
 * moves a lease back, and a batch answers each key on its own. Extend {@link KeyStoreContract},
 * which includes these tests, rather than this class.
 */
public abstract class LeaseRenewalContract extends StoreContractSupport {

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
  public void aRenewalLandingAfterANewerOneNeverMovesTheLeaseBack() {
    renewalsLandOutOfOrder(false);
  }

  @Test
  public void aBatchRenewalLandingAfterANewerOneNeverMovesTheLeaseBack() {
    renewalsLandOutOfOrder(true);
  }

  /**
   * The keeper's renewal the client gave up on (request time T0) reaches the store after a newer
   * one (T0 + lease / 2): the lease stays at the newer end, and the late one answers renewed (the
   * claim is still its owner's), not lost. On server time the store takes its own clock, so a later
   * request's lease ends later anyway; the lease there is long enough not to run out.
   */
  private void renewalsLandOutOfOrder(boolean batch) {
    String keyId = newKeyId();
    String token = newToken();
    Duration lease = serverTime() ? Duration.ofSeconds(30) : LONG_LEASE;
    store().claim(claim(keyId, token, lease, LONG_RETENTION));

    boolean newer = renew(batch, extend(keyId, token, lease, requestNow(lease.dividedBy(2))));
    boolean older = renew(batch, extend(keyId, token, lease, requestNow(ZERO)));
    ClaimResult later =
        store()
            .claim(
                claim(keyId, newToken(), lease, LONG_RETENTION)
                    .withNow(requestNow(lease.multipliedBy(5).dividedBy(4))));

    assertThat(newer).isTrue();
    assertThat(older)
        .as("a late renewal of a claim still held, already leased further: renewed, not lost")
        .isTrue();
    assertThat(later).isInstanceOf(ClaimResult.Existing.class);
    assertThat(((ClaimResult.Existing) later).leaseExpired())
        .as("the newer renewal's lease (T0 + 1.5 leases) still runs at T0 + 1.25 leases")
        .isFalse();
    assertThat(existing(later).attempt()).isEqualTo(1);
    assertThat(store().complete(complete(keyId, token, bytes("renewed")))).isTrue();
  }

  /**
   * probeJ: one batch renewal of a mix of keys answers each on its own: its owner's claims (one
   * already leased further by a newer renewal, one asked for twice) are renewed, and the lease
   * already further is not moved back; a stale token, a completed, a released, an absent key and a
   * key released and claimed again by another owner are refused, and none is revived, created or
   * taken from its new owner.
   */
  @Test
  public void extendAllAnswersEachKeyOfAMixOnItsOwn() {
    Duration lease = serverTime() ? Duration.ofSeconds(30) : LONG_LEASE;
    String owned = newKeyId();
    String ownedToken = newToken();
    store().claim(claim(owned, ownedToken, lease, LONG_RETENTION));
    String further = newKeyId();
    String furtherToken = newToken();
    store().claim(claim(further, furtherToken, lease, LONG_RETENTION));
    assertThat(store().extend(extend(further, furtherToken, lease, requestNow(lease.dividedBy(2)))))
        .isTrue();
    String stale = newKeyId();
    String staleOwner = newToken();
    store().claim(claim(stale, staleOwner, lease, LONG_RETENTION));
    String completed = newKeyId();
    String completedToken = newToken();
    store().claim(claim(completed, completedToken, lease, LONG_RETENTION));
    assertThat(store().complete(complete(completed, completedToken, bytes("done")))).isTrue();
    String released = newKeyId();
    String releasedToken = newToken();
    store().claim(claim(released, releasedToken, lease, LONG_RETENTION));
    assertThat(store().release(released, releasedToken)).isTrue();
    String absent = newKeyId();
    String reclaimed = newKeyId();
    String firstToken = newToken();
    store().claim(claim(reclaimed, firstToken, lease, LONG_RETENTION));
    assertThat(store().release(reclaimed, firstToken)).isTrue();
    String secondToken = newToken();
    assertThat(store().claim(claim(reclaimed, secondToken, lease, LONG_RETENTION)))
        .isEqualTo(new ClaimResult.Claimed(1, false));

    List<Boolean> renewed =
        store()
            .extendAll(
                List.of(
                    extend(owned, ownedToken, lease, requestNow(ZERO)),
                    extend(further, furtherToken, lease, requestNow(ZERO)),
                    extend(stale, newToken(), lease, requestNow(ZERO)),
                    extend(completed, completedToken, lease, requestNow(ZERO)),
                    extend(released, releasedToken, lease, requestNow(ZERO)),
                    extend(absent, newToken(), lease, requestNow(ZERO)),
                    extend(reclaimed, firstToken, lease, requestNow(ZERO)),
                    extend(owned, ownedToken, lease, requestNow(ZERO))));

    assertThat(renewed).containsExactly(true, true, false, false, false, false, false, true);
    ClaimResult furtherLater =
        store()
            .claim(
                claim(further, newToken(), lease, LONG_RETENTION)
                    .withNow(requestNow(lease.multipliedBy(5).dividedBy(4))));
    assertThat(((ClaimResult.Existing) furtherLater).leaseExpired())
        .as("the lease renewed further is not moved back by the batch's earlier renewal")
        .isFalse();
    assertThat(existing(store().claim(claim(completed, newToken()))).state())
        .isEqualTo(RecordState.COMPLETED);
    assertThat(store().claim(claim(released, newToken())))
        .isEqualTo(new ClaimResult.Claimed(1, false));
    assertThat(store().claim(claim(absent, newToken())))
        .isEqualTo(new ClaimResult.Claimed(1, false));
    assertThat(store().complete(complete(reclaimed, firstToken, bytes("old owner")))).isFalse();
    assertThat(store().complete(complete(reclaimed, secondToken, bytes("new owner")))).isTrue();
    assertThat(store().complete(complete(stale, staleOwner, bytes("its owner")))).isTrue();
    assertThat(store().complete(complete(owned, ownedToken, bytes("renewed")))).isTrue();
  }

  private boolean renew(boolean batch, ExtendRequest request) {
    return batch ? store().extendAll(List.of(request)).get(0) : store().extend(request);
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
