package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.RecordState;
import dev.idempotency.tck.ForwardingKeyStore;
import dev.idempotency.testservers.Poll;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A permanent failure whose write, and then the release after it, failed while the store was down:
 * the guard writes the failure in the background ({@link PendingOutcomes}) and does not also
 * release the key in the background ({@link UnsentClaims#release}, added by suspects for a failed
 * release), which could win the race once the store is back, delete the record, and let a retry run
 * the sender again. In-memory store behind a forwarding store that fails every write while the test
 * says it is down.
 */
class PermanentFailureWrittenLateTest {

  static final Duration TTL = Duration.ofHours(1);

  final AtomicBoolean down = new AtomicBoolean();

  /** Only outcome writes fail: the release after a permanent failure would be answered. */
  final AtomicBoolean writesDown = new AtomicBoolean();

  final ForwardingKeyStore store =
      new ForwardingKeyStore(InMemoryKeyStore.builder().build()) {
        @Override
        public boolean complete(CompleteRequest request) {
          failIfDown();
          if (writesDown.get()) {
            throw new KeyStoreException("outcome writes fail", null);
          }
          return delegate.complete(request);
        }

        @Override
        public boolean release(String keyId, String ownerToken) {
          failIfDown();
          return delegate.release(keyId, ownerToken);
        }

        @Override
        public boolean extend(ExtendRequest request) {
          failIfDown();
          return delegate.extend(request);
        }

        private void failIfDown() {
          if (down.get()) {
            throw new KeyStoreException("the store is down", null);
          }
        }
      };

  final IdempotencyGuard guard =
      IdempotencyGuard.builder()
          .store(store)
          .completionAttempts(1)
          .failureClassifier(failure -> failure instanceof IllegalArgumentException)
          .build();

  @AfterEach
  void close() {
    guard.close();
  }

  @Test
  void aPermanentFailureWrittenLateIsNotReleasedToo() throws Exception {
    String key = "permanent-late:" + UUID.randomUUID();
    AtomicInteger calls = new AtomicInteger();
    assertThatThrownBy(
            () ->
                guard.execute(
                    key,
                    TTL,
                    ctx -> {
                      calls.incrementAndGet();
                      down.set(true);
                      throw new IllegalArgumentException("invalid phone number");
                    }))
        .isInstanceOf(IllegalArgumentException.class);
    down.set(false);

    Poll.within(Duration.ofSeconds(30))
        .until(
            "the permanent failure stored",
            () -> guard.find(key),
            found -> found.isPresent() && found.get().state() == RecordState.FAILED);
    assertThatThrownBy(() -> guard.execute(key, TTL, ctx -> "sent-" + calls.incrementAndGet()))
        .isInstanceOf(IdempotencyStoredFailureException.class);
    assertThat(calls).as("sender calls").hasValue(1);
  }

  /**
   * The permanent failure's write failed but the store answers releases: the guard released the key
   * at once beside handing the write to the background, so the write found no record of its token
   * and a retry ran the sender again (blocking and async alike).
   */
  @ParameterizedTest
  @ValueSource(booleans = {false, true})
  void aPermanentFailureWrittenLateIsNotReleasedAtOnceEither(boolean async) throws Exception {
    String key = "permanent-late-release:" + async + ":" + UUID.randomUUID();
    AtomicInteger calls = new AtomicInteger();
    Sender<String> failing =
        ctx -> {
          calls.incrementAndGet();
          writesDown.set(true);
          throw new IllegalArgumentException("invalid phone number");
        };
    if (async) {
      assertThatThrownBy(
              () ->
                  guard
                      .executeAsync(
                          key,
                          TTL,
                          ctx -> {
                            calls.incrementAndGet();
                            writesDown.set(true);
                            return CompletableFuture.<String>failedFuture(
                                new IllegalArgumentException("invalid phone number"));
                          })
                      .toCompletableFuture()
                      .join())
          .hasRootCauseInstanceOf(IllegalArgumentException.class);
    } else {
      assertThatThrownBy(() -> guard.execute(key, TTL, failing))
          .isInstanceOf(IllegalArgumentException.class);
    }
    writesDown.set(false);

    Poll.within(Duration.ofSeconds(30))
        .until(
            "the permanent failure stored",
            () -> guard.find(key),
            found -> found.isPresent() && found.get().state() == RecordState.FAILED);
    assertThatThrownBy(() -> guard.execute(key, TTL, ctx -> "sent-" + calls.incrementAndGet()))
        .isInstanceOf(IdempotencyStoredFailureException.class);
    assertThat(calls).as("sender calls").hasValue(1);
  }
}
