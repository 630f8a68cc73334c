package dev.idempotency.tck;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.Batch;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.KeyStoreException;
import dev.idempotency.ResultCodec;
import dev.idempotency.Sender;
import dev.idempotency.UnreadableRecordException;
import dev.idempotency.spi.KeyStore;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * A record the store holds but cannot read (a hand edit or another writer left a state the store
 * does not know) is that key's error, {@link UnreadableRecordException}: the store answered, so the
 * guard's breaker stays closed and other keys' sends go on, and the key is never sent again, even
 * by a fail-open guard (the record may be a completed send). Checked for a lookup, and for claims
 * of the key (as a client retrying it makes), blocking, async and in a batch beside a healthy key,
 * each followed by a send of another key.
 *
 * <p>A store's test extends it with two hooks: {@link #newStore} gives each test a store of its own
 * (its own table or key prefix), and {@link #damageTheOnlyRecord} makes the one record that store
 * then holds unreadable, by writing to the backend directly.
 */
public abstract class UnreadableRecordContract {

  /** The window of every key the contract sends. */
  protected static final Duration TTL = Duration.ofHours(1);

  /** How many times a case tries the unreadable key, each followed by a send of another key. */
  protected static final int ROUNDS = 10;

  /** For a store's test. */
  protected UnreadableRecordContract() {}

  /**
   * A store that holds nothing yet, for one test.
   *
   * @param name lower-case letters, digits and underscores, unique per test: a table name or key
   *     prefix may be made of it
   * @return the store, which the contract closes after the test if it is {@link AutoCloseable}
   * @throws Exception if the backend fails
   */
  protected abstract KeyStore newStore(String name) throws Exception;

  /**
   * Makes the store of {@link #newStore newStore(name)}, which holds one record, unable to read it
   * (an unknown state, or a value that is not a record of the store).
   *
   * @param name the name the store was made with
   * @throws Exception if the backend fails
   */
  protected abstract void damageTheOnlyRecord(String name) throws Exception;

  /**
   * A lookup of the key throws {@link UnreadableRecordException}, and a send of another key right
   * after it goes on.
   *
   * @throws Exception if the backend fails
   */
  @Test
  public void aLookupOfAnUnreadableRecordIsThatRecordsErrorAndOtherSendsGoOn() throws Exception {
    inRounds(
        "find",
        "a lookup of the unreadable record",
        false,
        (guard, damaged, damagedSends) ->
            assertThatThrownBy(() -> guard.find(damaged))
                .as("the documented error for a record the store cannot read")
                .isInstanceOf(UnreadableRecordException.class));
  }

  /**
   * A blocking call of the key throws {@link UnreadableRecordException}, sends nothing, and a send
   * of another key right after it goes on.
   *
   * @throws Exception if the backend fails
   */
  @Test
  public void aClaimOfAnUnreadableRecordDoesNotRefuseOtherKeys() throws Exception {
    inRounds(
        "claim",
        "a claim of the unreadable key",
        false,
        (guard, damaged, damagedSends) ->
            assertThatThrownBy(() -> guard.execute(damaged, TTL, sendAgain(damagedSends)))
                .isInstanceOf(UnreadableRecordException.class)
                .hasMessageContaining("cannot read")
                .hasMessageContaining("nothing was sent"));
  }

  /**
   * An async call of the key fails with {@link UnreadableRecordException}, a batch refuses it
   * alone, and an async send of another key right after them goes on.
   *
   * @throws Exception if the backend fails
   */
  @Test
  public void anAsyncClaimOrABatchOfAnUnreadableRecordDoesNotRefuseOtherKeys() throws Exception {
    inRounds(
        "async",
        "async and batch claims of the unreadable key",
        true,
        (guard, damaged, damagedSends) -> {
          CompletableFuture<String> damagedCall =
              guard
                  .executeAsync(
                      damaged,
                      TTL,
                      ctx -> {
                        damagedSends.incrementAndGet();
                        return CompletableFuture.completedFuture("sent again");
                      })
                  .toCompletableFuture();
          assertThatThrownBy(() -> damagedCall.get(60, TimeUnit.SECONDS))
              .hasCauseInstanceOf(UnreadableRecordException.class);
          assertABatchRefusesItAlone(guard, damaged);
        });
  }

  /**
   * A fail-open guard refuses the key too: its record may be a completed send.
   *
   * @throws Exception if the backend fails
   */
  @Test
  public void aFailOpenGuardNeverSendsAnUnreadableKey() throws Exception {
    onDamagedKey(
        "open",
        true,
        (guard, damaged, damagedSends) ->
            assertThatThrownBy(() -> guard.execute(damaged, TTL, sendAgain(damagedSends)))
                .as("a record that may be a completed send is never sent")
                .isInstanceOf(UnreadableRecordException.class));
  }

  /**
   * Claims a batch of {@code damaged} and a healthy key: {@code damaged} alone is refused, with
   * {@link UnreadableRecordException}, and the healthy key is claimed and sent.
   *
   * @param guard a guard on the store
   * @param damaged a key whose record the store cannot read
   */
  protected static void assertABatchRefusesItAlone(IdempotencyGuard guard, String damaged) {
    String healthy = "order:" + UUID.randomUUID();
    try (Batch<String> batch =
        guard.claimBatch(
            List.of(IdempotencyRequest.of(damaged, TTL), IdempotencyRequest.of(healthy, TTL)),
            ResultCodec.string())) {
      assertThat(batch.refused().keySet()).containsExactly(damaged);
      assertThat(batch.refused().get(damaged)).isInstanceOf(UnreadableRecordException.class);
      assertThat(batch.claimedKeys()).as("the healthy key of the batch").containsExactly(healthy);
      for (Batch.Item item : batch.toSend()) {
        batch.succeeded(item, "batch sent");
      }
    }
  }

  /** A case run on a guard of a store of its own, whose one record, of key damaged, was damaged. */
  private interface DamagedKeyCase {
    void run(IdempotencyGuard guard, String damaged, AtomicInteger damagedSends) throws Exception;
  }

  /**
   * Sends a key on a new store, damages its record, runs {@code body}, then checks that the damaged
   * key was never sent again.
   */
  private void onDamagedKey(String test, boolean failOpen, DamagedKeyCase body) throws Exception {
    String name = name(test);
    KeyStore store = newStore(name);
    try (IdempotencyGuard guard =
        IdempotencyGuard.builder().store(store).failOpen(failOpen).build()) {
      String damaged = "order:" + UUID.randomUUID();
      assertThat(guard.execute(damaged, TTL, ctx -> "sent")).isEqualTo("sent");
      damageTheOnlyRecord(name);
      AtomicInteger damagedSends = new AtomicInteger();
      body.run(guard, damaged, damagedSends);
      assertThat(damagedSends).as("the unreadable key is never sent again").hasValue(0);
    } finally {
      if (store instanceof AutoCloseable closeable) {
        closeable.close();
      }
    }
  }

  private static Sender<String> sendAgain(AtomicInteger sends) {
    return ctx -> {
      sends.incrementAndGet();
      return "sent again";
    };
  }

  /**
   * {@link #onDamagedKey}: {@link #ROUNDS} times {@code round}, each followed by a send of another
   * key (async or not), which the guard must not refuse.
   */
  private void inRounds(String test, String after, boolean async, DamagedKeyCase round)
      throws Exception {
    onDamagedKey(
        test,
        false,
        (guard, damaged, damagedSends) -> {
          List<String> refusedOthers = new ArrayList<>();
          for (int i = 0; i < ROUNDS; i++) {
            round.run(guard, damaged, damagedSends);
            refusedOthers.addAll(sendAnotherKey(guard, async));
          }
          assertThat(refusedOthers).as("sends of healthy keys right after " + after).isEmpty();
        });
  }

  /** Sends a new key; returns the refusal, if the guard refused it. */
  private static List<String> sendAnotherKey(IdempotencyGuard guard, boolean async)
      throws InterruptedException, TimeoutException {
    String other = "order:" + UUID.randomUUID();
    try {
      String result =
          async
              ? guard
                  .executeAsync(other, TTL, ctx -> CompletableFuture.completedFuture("other sent"))
                  .toCompletableFuture()
                  .get(60, TimeUnit.SECONDS)
              : guard.execute(other, TTL, ctx -> "other sent");
      assertThat(result).isEqualTo("other sent");
      return List.of();
    } catch (KeyStoreException refused) {
      return List.of(refused.getMessage());
    } catch (ExecutionException refused) {
      return List.of(String.valueOf(refused.getCause()));
    }
  }

  private static String name(String test) {
    return test + "_" + UUID.randomUUID().toString().replace("-", "").substring(0, 12);
  }
}
