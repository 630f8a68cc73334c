package dev.idempotency.tck;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spi.StoredRecord;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.api.Test;

/**
 * The contract every {@link KeyStore} must pass, at the level of the SPI, run against a real
 * backend: claims, fenced completes, releases and renewals, takeovers, windows, payloads, batches
 * and many threads at once. A store's test extends this class and returns its store from {@link
 * #store()}; each test uses fresh key ids, so no cleanup is needed between tests.
 *
 * <p>Time: for a store that takes time from the request, tests move time by passing a later {@code
 * now}. For a store with {@link KeyStore#usesServerTime() server time}, tests use short leases and
 * windows and poll, bounded, until the server's time has passed them.
 *
 * <p>Run {@link GuardOnStoreContract} beside it, to check the guard's promises on the store.
 */
public abstract class KeyStoreContract extends LeaseAndWindowContract {

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

  @Test
  public void oneMebibytePayloadRoundTrips() {
    byte[] payload = new byte[1024 * 1024];
    new Random(42).nextBytes(payload);
    assertRoundTrip(payload);
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

  @Test
  public void thirtyTwoThreadsClaimingOneKeyGiveExactlyOneWinner() throws Exception {
    String keyId = newKeyId();
    int threads = 32;
    CountDownLatch start = new CountDownLatch(1);
    List<Callable<ClaimResult>> tasks = new ArrayList<>();
    for (int i = 0; i < threads; i++) {
      tasks.add(
          () -> {
            start.await();
            return store().claim(claim(keyId, newToken()));
          });
    }
    List<ClaimResult> results = runAll(tasks, start);

    assertThat(results.stream().filter(KeyStoreContract::isClaimed).count()).isEqualTo(1);
    assertThat(results.stream().filter(r -> r instanceof ClaimResult.Existing).count())
        .isEqualTo(threads - 1);
  }

  @Test
  public void manyKeysInParallelDoNotCrossTalk() throws Exception {
    int threads = 16;
    int keysPerThread = 50;
    CountDownLatch start = new CountDownLatch(1);
    List<Callable<List<String>>> tasks = new ArrayList<>();
    for (int t = 0; t < threads; t++) {
      tasks.add(
          () -> {
            start.await();
            List<String> keyIds = new ArrayList<>();
            for (int k = 0; k < keysPerThread; k++) {
              String keyId = newKeyId();
              String token = newToken();
              assertThat(store().claim(claim(keyId, token)))
                  .isEqualTo(new ClaimResult.Claimed(1, false));
              assertThat(store().complete(complete(keyId, token, bytes(keyId)))).isTrue();
              keyIds.add(keyId);
            }
            return keyIds;
          });
    }
    List<List<String>> perThread = runAll(tasks, start);

    for (List<String> keyIds : perThread) {
      for (String keyId : keyIds) {
        assertThat(existing(store().claim(claim(keyId, newToken()))).payload())
            .isEqualTo(bytes(keyId));
      }
    }
  }

  // ---- batches: the same per-key semantics through claimAll and completeAll

  @Test
  public void claimAllSortsFreshInFlightAndCompletedKeysPerKey() {
    String inFlight = newKeyId();
    String completed = newKeyId();
    String completedToken = newToken();
    store().claim(claim(inFlight, newToken()));
    store().claim(claim(completed, completedToken));
    store().complete(complete(completed, completedToken, bytes("n_1")));
    List<ClaimRequest> batch = new ArrayList<>();
    List<String> fresh = new ArrayList<>();
    for (int i = 0; i < 20; i++) {
      String keyId = newKeyId();
      fresh.add(keyId);
      batch.add(claim(keyId, newToken()));
    }
    batch.add(claim(inFlight, newToken()));
    batch.add(claim(completed, newToken()));

    List<ClaimResult> results = store().claimAll(batch);

    assertThat(results).hasSize(22);
    assertThat(results.subList(0, 20)).containsOnly(new ClaimResult.Claimed(1, false));
    assertThat(existing(results.get(20)).state()).isEqualTo(RecordState.IN_PROGRESS);
    assertThat(existing(results.get(21)).payload()).isEqualTo(bytes("n_1"));
    for (int i = 0; i < 20; i++) {
      assertThat(
              store().complete(complete(fresh.get(i), batch.get(i).ownerToken(), bytes("b" + i))))
          .as("each key of the batch is owned by its own token")
          .isTrue();
    }
  }

  @Test
  public void completeAllIsFencedPerKey() {
    List<CompleteRequest> completes = new ArrayList<>();
    List<String> keyIds = new ArrayList<>();
    for (int i = 0; i < 10; i++) {
      String keyId = newKeyId();
      String token = newToken();
      keyIds.add(keyId);
      store().claim(claim(keyId, token));
      completes.add(complete(keyId, i % 2 == 0 ? token : newToken(), bytes("r" + i)));
    }

    List<Boolean> written = store().completeAll(completes);

    for (int i = 0; i < 10; i++) {
      assertThat(written.get(i)).as("key %d", i).isEqualTo(i % 2 == 0);
      StoredRecord record = existing(store().claim(claim(keyIds.get(i), newToken())));
      assertThat(record.state())
          .isEqualTo(i % 2 == 0 ? RecordState.COMPLETED : RecordState.IN_PROGRESS);
    }
  }
}
