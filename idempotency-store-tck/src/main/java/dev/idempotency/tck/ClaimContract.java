package dev.idempotency.tck;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spi.StoredRecord;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The store contract's single-key operations: claims, fenced completes and releases, repeats of an
 * owner's own write, fingerprints, debug keys and payloads of every size. Part of {@link
 * KeyStoreContract}; extend that one.
 */
public abstract class ClaimContract extends LeaseAndWindowContract {

  @Test
  public void claimOfAnAbsentKeyIsTheFirstAttempt() {
    ClaimResult result = store().claim(claim(newKeyId(), newToken()));

    assertThat(result).isEqualTo(new ClaimResult.Claimed(1, false));
  }

  @Test
  public void secondClaimReturnsTheInProgressRecordAndChangesNothing() {
    String keyId = newKeyId();
    store()
        .claim(
            new ClaimRequest(
                keyId, newToken(), "fp-1", T0, LONG_LEASE, LONG_RETENTION, true, null));

    ClaimResult second = store().claim(claim(keyId, newToken()));

    assertThat(second).isInstanceOf(ClaimResult.Existing.class);
    assertThat(((ClaimResult.Existing) second).leaseExpired()).isFalse();
    StoredRecord record = existing(second);
    assertThat(record.state()).isEqualTo(RecordState.IN_PROGRESS);
    assertThat(record.attempt()).isEqualTo(1);
    assertThat(record.fingerprint()).isEqualTo("fp-1");
    assertThat(record.payload()).isNull();
    assertThat(record.completedAt()).isNull();
    assertThat(record.leaseDeadline()).isAfter(record.createdAt());
    assertThat(record.retentionDeadline()).isAfter(record.leaseDeadline());
  }

  @Test
  public void completedRecordIsReplayedWithItsPayload() {
    String keyId = newKeyId();
    String token = newToken();
    store().claim(claim(keyId, token));

    assertThat(store().complete(complete(keyId, token, bytes("n_801")))).isTrue();
    StoredRecord record = existing(store().claim(claim(keyId, newToken())));

    assertThat(record.state()).isEqualTo(RecordState.COMPLETED);
    assertThat(record.payload()).isEqualTo(bytes("n_801"));
    assertThat(record.completedAt()).isNotNull();
    assertThat(record.attempt()).isEqualTo(1);
  }

  @Test
  public void failedRecordIsKeptAndReturned() {
    String keyId = newKeyId();
    String token = newToken();
    store().claim(claim(keyId, token));

    boolean written =
        store()
            .complete(
                new CompleteRequest(keyId, token, RecordState.FAILED, bytes("bad number"), T0));
    StoredRecord record = existing(store().claim(claim(keyId, newToken())));

    assertThat(written).isTrue();
    assertThat(record.state()).isEqualTo(RecordState.FAILED);
    assertThat(record.payload()).isEqualTo(bytes("bad number"));
  }

  @Test
  public void completeWithAStaleTokenIsRefusedAndChangesNothing() {
    String keyId = newKeyId();
    store().claim(claim(keyId, newToken()));

    boolean written = store().complete(complete(keyId, newToken(), bytes("intruder")));

    assertThat(written).isFalse();
    StoredRecord record = existing(store().claim(claim(keyId, newToken())));
    assertThat(record.state()).isEqualTo(RecordState.IN_PROGRESS);
    assertThat(record.payload()).isNull();
  }

  @Test
  public void completeOfAnAbsentKeyIsRefused() {
    assertThat(store().complete(complete(newKeyId(), newToken(), bytes("x")))).isFalse();
  }

  @Test
  public void completedRecordCannotBeCompletedTwice() {
    String keyId = newKeyId();
    String token = newToken();
    store().claim(claim(keyId, token));
    store().complete(complete(keyId, token, bytes("first")));

    assertThat(store().complete(complete(keyId, token, bytes("second")))).isFalse();
    assertThat(existing(store().claim(claim(keyId, newToken()))).payload())
        .isEqualTo(bytes("first"));
  }

  /**
   * A completion whose reply was lost after the store applied it is sent again by its owner: the
   * same owner with the same outcome is a success, so the guard does not report a recorded send as
   * unrecorded.
   */
  @Test
  public void completionRepeatedByItsOwnerWithTheSameOutcomeSucceeds() {
    String keyId = newKeyId();
    String token = newToken();
    store().claim(claim(keyId, token));
    assertThat(store().complete(complete(keyId, token, bytes("n_801")))).isTrue();

    assertThat(store().complete(complete(keyId, token, bytes("n_801"))))
        .as("the same owner, the same outcome")
        .isTrue();
    assertThat(store().complete(complete(keyId, newToken(), bytes("n_801"))))
        .as("another owner, the same outcome")
        .isFalse();
    StoredRecord record = existing(store().claim(claim(keyId, newToken())));
    assertThat(record.state()).isEqualTo(RecordState.COMPLETED);
    assertThat(record.payload()).isEqualTo(bytes("n_801"));
  }

  @Test
  public void failureRepeatedByItsOwnerSucceedsAndAnotherOutcomeIsRefused() {
    String keyId = newKeyId();
    String token = newToken();
    store().claim(claim(keyId, token));
    CompleteRequest failure =
        new CompleteRequest(keyId, token, RecordState.FAILED, bytes("invalid"), T0.plusSeconds(1));
    assertThat(store().complete(failure)).isTrue();

    assertThat(store().complete(failure)).as("the same failure again").isTrue();
    assertThat(store().complete(complete(keyId, token, bytes("invalid"))))
        .as("the same owner, another state")
        .isFalse();
    assertThat(existing(store().claim(claim(keyId, newToken()))).state())
        .isEqualTo(RecordState.FAILED);
  }

  @Test
  public void completeAllRepeatedByTheOwnersSucceedsPerKey() {
    List<CompleteRequest> completes = new ArrayList<>();
    for (int i = 0; i < 6; i++) {
      String keyId = newKeyId();
      String token = newToken();
      store().claim(claim(keyId, token));
      completes.add(complete(keyId, token, bytes("r" + i)));
    }
    assertThat(store().completeAll(completes)).containsOnly(true);
    List<CompleteRequest> repeated = new ArrayList<>();
    for (int i = 0; i < completes.size(); i++) {
      CompleteRequest done = completes.get(i);
      repeated.add(i % 2 == 0 ? done : complete(done.keyId(), done.ownerToken(), bytes("other")));
    }

    List<Boolean> written = store().completeAll(repeated);

    for (int i = 0; i < repeated.size(); i++) {
      assertThat(written.get(i)).as("key %d", i).isEqualTo(i % 2 == 0);
      assertThat(existing(store().claim(claim(completes.get(i).keyId(), newToken()))).payload())
          .isEqualTo(bytes("r" + i));
    }
  }

  @Test
  public void releaseWithAStaleTokenIsRefusedAndWithTheOwnerTokenFreesTheKey() {
    String keyId = newKeyId();
    String token = newToken();
    store().claim(claim(keyId, token));

    assertThat(store().release(keyId, newToken())).isFalse();
    assertThat(existing(store().claim(claim(keyId, newToken()))).state())
        .isEqualTo(RecordState.IN_PROGRESS);

    assertThat(store().release(keyId, token)).isTrue();
    assertThat(store().claim(claim(keyId, newToken())))
        .isEqualTo(new ClaimResult.Claimed(1, false));
  }

  /**
   * The guard takes back a claim it gave up on with releases repeated over a lease (issue 37): a
   * release of a claim the store never wrote changes nothing, and one repeated after the key was
   * claimed again never frees the new owner's claim.
   */
  @Test
  public void aReleaseOfAClaimNeverWrittenOrRepeatedLeavesOtherClaimsAlone() {
    String keyId = newKeyId();
    String strayToken = newToken();
    assertThat(store().release(keyId, strayToken)).as("never written").isFalse();
    assertThat(store().claim(claim(keyId, strayToken)))
        .isEqualTo(new ClaimResult.Claimed(1, false));
    assertThat(store().release(keyId, strayToken)).as("written late, taken back").isTrue();
    String nextToken = newToken();
    assertThat(store().claim(claim(keyId, nextToken))).isEqualTo(new ClaimResult.Claimed(1, false));

    assertThat(store().release(keyId, strayToken)).as("repeated").isFalse();
    assertThat(existing(store().claim(claim(keyId, newToken()))).state())
        .isEqualTo(RecordState.IN_PROGRESS);
    assertThat(store().complete(complete(keyId, nextToken, bytes("sent")))).isTrue();
    assertThat(store().release(keyId, strayToken)).as("repeated after completion").isFalse();
    assertThat(existing(store().claim(claim(keyId, newToken()))).payload())
        .isEqualTo(bytes("sent"));
  }

  @Test
  public void completedRecordCannotBeReleased() {
    String keyId = newKeyId();
    String token = newToken();
    store().claim(claim(keyId, token));
    store().complete(complete(keyId, token, bytes("done")));

    assertThat(store().release(keyId, token)).isFalse();
    assertThat(existing(store().claim(claim(keyId, newToken()))).state())
        .isEqualTo(RecordState.COMPLETED);
  }

  @Test
  public void fingerprintIsReturnedWithTheRecord() {
    String keyId = newKeyId();
    store()
        .claim(
            new ClaimRequest(keyId, newToken(), "abc", T0, LONG_LEASE, LONG_RETENTION, true, null));

    StoredRecord record =
        existing(
            store()
                .claim(
                    new ClaimRequest(
                        keyId, newToken(), "xyz", T0, LONG_LEASE, LONG_RETENTION, true, null)));

    assertThat(record.fingerprint()).isEqualTo("abc");
  }

  @Test
  public void debugKeyDoesNotChangeIdentity() {
    String keyId = newKeyId();
    store()
        .claim(
            new ClaimRequest(
                keyId, newToken(), "", T0, LONG_LEASE, LONG_RETENTION, true, "otp:user_42"));

    ClaimResult second =
        store()
            .claim(
                new ClaimRequest(
                    keyId, newToken(), "", T0, LONG_LEASE, LONG_RETENTION, true, "other"));

    assertThat(second).isInstanceOf(ClaimResult.Existing.class);
  }

  @Test
  public void emptyPayloadRoundTrips() {
    assertRoundTrip(new byte[0]);
  }

  @Test
  public void everyByteValueRoundTrips() {
    byte[] payload = new byte[512];
    for (int i = 0; i < payload.length; i++) {
      payload[i] = (byte) i;
    }
    assertRoundTrip(payload);
  }

  /**
   * A 1 MiB result, or the store's largest if it takes less (DynamoDB's item limit is 400 KB; the
   * guard records a larger result as sent without a stored result).
   */
  @Test
  public void oneMebibytePayloadRoundTrips() {
    byte[] payload = new byte[Math.min(1024 * 1024, store().maxPayloadBytes())];
    new Random(42).nextBytes(payload);
    assertRoundTrip(payload);
  }

  /** A result over the store's limit is refused before any write: the claim stays as it was. */
  @Test
  public void aPayloadOverTheStoresLimitIsRefusedAndTheClaimStaysInProgress() {
    String keyId = newKeyId();
    String token = newToken();
    store().claim(claim(keyId, token));
    byte[] payload = new byte[store().maxPayloadBytes() + 1];

    assertThatThrownBy(() -> store().complete(complete(keyId, token, payload)))
        .isInstanceOf(IllegalArgumentException.class);
    StoredRecord record = existing(store().claim(claim(keyId, newToken())));
    assertThat(record.state()).isEqualTo(RecordState.IN_PROGRESS);
  }

  private void assertRoundTrip(byte[] payload) {
    String keyId = newKeyId();
    String token = newToken();
    store().claim(claim(keyId, token));
    assertThat(store().complete(complete(keyId, token, payload.clone()))).isTrue();

    byte[] stored = existing(store().claim(claim(keyId, newToken()))).payload();

    assertThat(stored).hasSize(payload.length);
    assertThat(stored).isEqualTo(payload);
  }
}
