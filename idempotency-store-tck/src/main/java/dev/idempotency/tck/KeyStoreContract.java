package dev.idempotency.tck;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spi.StoredRecord;
import java.util.ArrayList;
import java.util.List;
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
 * <p>Its cases are grouped by what they cover: {@link LeaseAndWindowContract}, {@link
 * ClaimContract}, {@link FindAndDeleteContract}, {@link TakeBackContract}, and here many threads
 * and batches.
 *
 * <p>Run {@link GuardOnStoreContract} beside it, to check the guard's promises on the store.
 */
public abstract class KeyStoreContract extends TakeBackContract {

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
