package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.ForwardingKeyStore;
import dev.idempotency.tck.MutableClock;
import java.time.Duration;
import java.time.Instant;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * probeO (SPEC 1), after 5343a24: an async sender ({@code executeAsync}) that hands its provider
 * call to a task and gives up on it (its stage fails) has its key released; here the store fails
 * that release, so the key stays claimed and the guard retries the release in the background. The
 * task that starts meanwhile must be told the key is not held (it would otherwise send on a claim
 * the guard already gave up, with a retry free to send as soon as the release lands), and again
 * once the release landed and a retry sent. The key is never held for ever: once the store answers,
 * the next call sends, once.
 *
 * <p>In-memory store behind one that fails releases while told to; lease 4 s, clock moved by hand.
 */
class LeaseHeldReleaseFailsAsyncProbeTest {

  static final Duration TTL = Duration.ofHours(1);

  final MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final AtomicBoolean failReleases = new AtomicBoolean();
  final AtomicInteger failedReleases = new AtomicInteger();
  final KeyStore store =
      new ForwardingKeyStore(InMemoryKeyStore.builder().build()) {
        @Override
        public boolean release(String keyId, String ownerToken) {
          if (failReleases.get()) {
            failedReleases.incrementAndGet();
            throw new KeyStoreException("the store did not answer in time", null);
          }
          return delegate.release(keyId, ownerToken);
        }
      };
  final IdempotencyGuard guard =
      IdempotencyGuard.builder()
          .store(store)
          .clock(clock)
          .lease(Duration.ofSeconds(4))
          .inFlightWait(Duration.ZERO)
          .build();

  @AfterEach
  void close() {
    guard.close();
  }

  @Test
  void aTaskOfAnAsyncSendWhoseReleaseFailedIsNotHeldAndTheKeyIsSentOnceLater() throws Exception {
    String key = "lease-held-release-fails-async:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    AtomicReference<SendContext> handedOn = new AtomicReference<>();

    failReleases.set(true);
    Throwable first =
        catchThrowable(
            () ->
                guard
                    .executeAsync(
                        key,
                        TTL,
                        ctx -> {
                          handedOn.set(ctx); // the provider call is queued on a task
                          return CompletableFuture.<String>failedFuture(
                              new IllegalStateException("gave up waiting for the task"));
                        })
                    .toCompletableFuture()
                    .get(30, TimeUnit.SECONDS));
    assertThat(first).hasCauseInstanceOf(IllegalStateException.class);
    assertThat(failedReleases).as("the release failed").hasPositiveValue();

    boolean heldWhileReleaseFails = handedOn.get().leaseHeld(); // the queued task starts now
    Throwable retryWhileHeld =
        catchThrowable(() -> guard.execute(key, TTL, ctx -> "retry-" + sends.incrementAndGet()));

    failReleases.set(false); // the store answers again
    clock.advance(Duration.ofSeconds(5)); // past the lease, whether the background release ran
    String retry = guard.execute(key, TTL, ctx -> "retry-" + sends.incrementAndGet());
    boolean heldAfterRetry = handedOn.get().leaseHeld();

    assertThat(heldWhileReleaseFails)
        .as("a key whose release is being retried is not held by the call that gave it up")
        .isFalse();
    assertThat(retryWhileHeld)
        .as("while the release fails the key stays claimed: a retry is told it is in progress")
        .isInstanceOf(IdempotencyInProgressException.class);
    assertThat(retry).isEqualTo("retry-1");
    assertThat(heldAfterRetry).isFalse();
    assertThat(sends).hasValue(1);
    assertThat(guard.execute(key, TTL, ctx -> "again")).isEqualTo("retry-1");
  }
}
