package dev.idempotency.tck;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spi.StoredRecord;
import java.time.Duration;
import java.time.Instant;
import org.junit.jupiter.api.Test;

/**
 * The store contract's operator operations: {@code find} and {@code delete}, what operators use to
 * look at a key and to resend it on purpose. Part of {@link KeyStoreContract}; extend that one.
 */
public abstract class FindAndDeleteContract extends ClaimContract {

  // ---- find and delete: what operators use to look at a key and to resend it on purpose

  @Test
  public void findOfAnAbsentKeyIsEmpty() {
    assertThat(store().find(newKeyId(), requestNow(Duration.ZERO))).isEmpty();
  }

  @Test
  public void findReportsAClaimInProgressAndChangesNothing() {
    String keyId = newKeyId();
    String token = newToken();
    store().claim(claim(keyId, token));

    StoredRecord found = store().find(keyId, requestNow(Duration.ZERO)).orElseThrow();
    StoredRecord seenByAClaim = existing(store().claim(claim(keyId, newToken())));

    assertThat(found.state()).isEqualTo(RecordState.IN_PROGRESS);
    assertThat(found.attempt()).isEqualTo(1);
    assertThat(found.payload()).isNull();
    assertThat(found.leaseDeadline()).isAfter(found.createdAt());
    assertThat(found.retentionDeadline()).isAfter(found.leaseDeadline());
    assertThat(seenByAClaim.attempt()).isEqualTo(1);
    assertThat(store().complete(complete(keyId, token, bytes("still ours")))).isTrue();
  }

  @Test
  public void findReportsACompletedRecordWithItsTimes() {
    String keyId = newKeyId();
    String token = newToken();
    store().claim(claim(keyId, token));
    store().complete(complete(keyId, token, bytes("n_801")));

    StoredRecord found = store().find(keyId, requestNow(Duration.ZERO)).orElseThrow();

    assertThat(found.state()).isEqualTo(RecordState.COMPLETED);
    assertThat(found.payload()).isEqualTo(bytes("n_801"));
    assertThat(found.completedAt()).isNotNull();
    assertThat(found.retentionDeadline()).isAfter(found.createdAt());
  }

  @Test
  public void deleteOfASettledRecordLetsTheNextClaimStartAfresh() {
    String completed = newKeyId();
    String completedToken = newToken();
    store().claim(claim(completed, completedToken));
    store().complete(complete(completed, completedToken, bytes("sent")));
    String failed = newKeyId();
    String failedToken = newToken();
    store().claim(claim(failed, failedToken));
    store()
        .complete(
            new CompleteRequest(
                failed, failedToken, RecordState.FAILED, bytes("invalid"), T0.plusSeconds(1)));

    assertThat(store().delete(completed, requestNow(Duration.ZERO))).isTrue();
    assertThat(store().delete(failed, requestNow(Duration.ZERO))).isTrue();

    assertThat(store().find(completed, requestNow(Duration.ZERO))).isEmpty();
    assertThat(store().claim(claim(completed, newToken())))
        .isEqualTo(new ClaimResult.Claimed(1, false));
    assertThat(store().claim(claim(failed, newToken())))
        .isEqualTo(new ClaimResult.Claimed(1, false));
  }

  @Test
  public void deleteRefusesARecordInProgressAndAnAbsentOne() {
    String keyId = newKeyId();
    String token = newToken();
    store().claim(claim(keyId, token));

    assertThat(store().delete(keyId, requestNow(Duration.ZERO)))
        .as("its owner may be sending")
        .isFalse();
    assertThat(store().delete(newKeyId(), requestNow(Duration.ZERO))).isFalse();
    assertThat(store().complete(complete(keyId, token, bytes("kept")))).isTrue();
  }

  @Test
  public void findAndDeleteCountARecordPastItsWindowAsAbsent() {
    String keyId = newKeyId();
    String token = newToken();
    Duration lease = expiringLease();
    Duration retention = expiringRetention();
    long start = System.nanoTime();
    store().claim(claim(keyId, token, lease, retention));
    store().complete(complete(keyId, token, bytes("old")));

    if (serverTime()) {
      awaitElapsed(start, retention.plusMillis(200));
    }
    Instant past = requestNow(retention.plusMillis(1));

    assertThat(store().find(keyId, past)).isEmpty();
    assertThat(store().delete(keyId, past)).isFalse();
  }
}
