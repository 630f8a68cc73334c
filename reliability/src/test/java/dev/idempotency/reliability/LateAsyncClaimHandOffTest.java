package dev.idempotency.reliability;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.KeyStoreException;
import dev.idempotency.Outcome;
import dev.idempotency.ResultCodec;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.ForwardingKeyStore;
import dev.idempotency.testservers.StepQueues;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * The fault run's two first attempts of one key by two live processes (issue 37), on a real Redis:
 * an async call whose claim was answered late is renewed before its send, and its send then waits
 * for a thread of the call's executor (in the fault run the guard's async pool, busy with slow
 * senders). The owner's store calls and its call's steps run here when the test runs them, one by
 * one. Meanwhile another guard, as another process would, tries the key for three leases. The key
 * is sent once: the owner's lease is renewed while its send waits, or, if the other guard took the
 * key over, the owner sends nothing.
 */
class LateAsyncClaimHandOffTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofMillis(400);

  /**
   * The call's steps after the store answered (the executor its send waits for) and the owner's
   * blocking-store executor (its claim, the late claim's renewal, its outcome).
   */
  final StepQueues steps = new StepQueues();

  final AtomicInteger sends = new AtomicInteger();

  @Test
  void aLateAsyncClaimWhoseSendWaitsForAThreadIsSentOnceOnRedis() throws Exception {
    try (RestartableRedis redis = new RestartableRedis(false)) {
      IdempotencyGuard owner =
          guard(new AnsweredLate(Stores.open(redis.uri(), 2), LEASE.multipliedBy(3).dividedBy(4)))
              .blockingStoreExecutor(steps.storeCalls())
              .build();
      IdempotencyGuard other = guard(Stores.open(redis.uri(), 2)).build();
      String key = "late-hand-off:" + UUID.randomUUID();
      try {
        CompletableFuture<Outcome<String>> first =
            owner
                .executeForOutcomeAsync(
                    IdempotencyRequest.of(key, TTL),
                    ResultCodec.string(),
                    ctx -> CompletableFuture.completedFuture("owner-" + sends.incrementAndGet()),
                    steps.callSteps())
                .toCompletableFuture();
        steps.nextStoreCall().run(); // the claim, answered with a quarter lease left
        steps.nextCallStep().run(); // the decision: renew first, on the store executor
        steps.nextStoreCall().run(); // the renewal
        Runnable send = steps.nextCallStep(); // the send, waiting for a thread of the executor

        Outcome<String> takenOver = tryTheKey(other, key, LEASE.multipliedBy(3));
        send.run();
        steps.runUntilDone(first, Duration.ofSeconds(30));

        assertThat(sends).as("provider sends of the key").hasValue(1);
        if (takenOver == null) {
          assertThat(first.join().value()).isEqualTo("owner-1");
        } else {
          assertThatThrownBy(first::join)
              .hasCauseInstanceOf(KeyStoreException.class)
              .hasMessageContaining("nothing was sent");
        }
      } finally {
        owner.close();
        other.close();
      }
    }
  }

  static IdempotencyGuard.Builder guard(KeyStore store) {
    return IdempotencyGuard.builder().store(store).lease(LEASE).inFlightWait(Duration.ZERO);
  }

  /** Calls the key until the call is not refused as in progress, for {@code span} at most. */
  private Outcome<String> tryTheKey(IdempotencyGuard guard, String key, Duration span)
      throws InterruptedException {
    long end = System.nanoTime() + span.toNanos();
    while (System.nanoTime() < end) {
      try {
        return guard.executeForOutcome(
            IdempotencyRequest.of(key, TTL),
            ResultCodec.string(),
            ctx -> "other-" + sends.incrementAndGet());
      } catch (IdempotencyInProgressException stillHeld) {
        Thread.sleep(20);
      }
    }
    return null;
  }

  /**
   * A store whose claims are answered {@code late} after they took effect, in real time: the
   * answer's delay is the fault modelled (the Redis store takes its server's time, so no clock).
   */
  static final class AnsweredLate extends ForwardingKeyStore {
    private final Duration late;

    AnsweredLate(KeyStore delegate, Duration late) {
      super(delegate);
      this.late = late;
    }

    @Override
    public ClaimResult claim(ClaimRequest request) {
      ClaimResult answer = delegate.claim(request);
      try {
        Thread.sleep(late.toMillis());
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      return answer;
    }
  }
}
