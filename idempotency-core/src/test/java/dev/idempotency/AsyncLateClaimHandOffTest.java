package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.ForwardingKeyStore;
import dev.idempotency.tck.MutableClock;
import dev.idempotency.testservers.StepQueues;
import java.time.Duration;
import java.time.Instant;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * An async call whose claim the store answered late is renewed before its send, on the
 * blocking-store executor, and then handed back to the call's executor to send. That hand-off may
 * wait (an async pool busy with slow senders): the lease must not run out unrenewed meanwhile, and
 * a claim taken over meanwhile must never be sent on (issue 37, the fault run's two first attempts
 * of one key by two live processes). Time is the guards' clock, moved by hand; the owner's store
 * calls and its call's steps run when the test runs them, one by one.
 */
class AsyncLateClaimHandOffTest {

  static final Duration TTL = Duration.ofHours(1);

  /** Long on the monotonic clock, so that no keeper round comes due while the test runs. */
  static final Duration LEASE = Duration.ofMinutes(1);

  final MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final KeyStore store = InMemoryKeyStore.builder().build();

  /**
   * The call's steps after the store answered (the executor its send waits for) and the owner's
   * blocking-store executor (its claim, the late claim's renewal, a release).
   */
  final StepQueues steps = new StepQueues();

  final AtomicInteger sends = new AtomicInteger();
  final String key = "late-hand-off:" + UUID.randomUUID();
  IdempotencyGuard owner;
  IdempotencyGuard other;
  CompletableFuture<Outcome<String>> first;

  @AfterEach
  void close() {
    for (IdempotencyGuard guard : new IdempotencyGuard[] {owner, other}) {
      if (guard != null) {
        guard.close();
      }
    }
  }

  @Test
  void aLateClaimTakenOverWhileItsSendWaitedForAThreadIsNeverSentOn() throws Exception {
    other = guard(store).build();
    Runnable send = startUntilItsSendWaits();

    clock.advance(LEASE.plusMillis(1)); // the wait outlasted the renewed lease
    Outcome<String> takenOver =
        other.executeForOutcome(
            IdempotencyRequest.of(key, TTL),
            ResultCodec.string(),
            ctx -> "other-" + sends.incrementAndGet());
    assertThat(takenOver.attempt()).as("the other caller took the lapsed lease over").isEqualTo(2);

    send.run();
    steps.runUntilDone(first, Duration.ofSeconds(30));

    assertThat(sends).as("provider sends of the key").hasValue(1);
    assertThatThrownBy(first::join)
        .hasCauseInstanceOf(KeyStoreException.class)
        .hasMessageContaining("nothing was sent");
  }

  @Test
  void aLateClaimWhoseSendWaitedForAThreadLongerThanItsLeaseStillSendsOnceIfNobodyTookIt()
      throws Exception {
    Runnable send = startUntilItsSendWaits();

    clock.advance(LEASE.plusMillis(1));
    send.run();
    steps.runUntilDone(first, Duration.ofSeconds(30));

    assertThat(first.join().value()).isEqualTo("owner-1");
    assertThat(first.join().recorded()).isTrue();
    assertThat(sends).hasValue(1);
  }

  IdempotencyGuard.Builder guard(KeyStore store) {
    return IdempotencyGuard.builder()
        .store(store)
        .clock(clock)
        .lease(LEASE)
        .inFlightWait(Duration.ZERO);
  }

  /**
   * Starts the owner's call and runs it up to its send: the claim (answered with a quarter lease
   * left), the step that decides on it (renew first, on the store executor), the renewal.
   *
   * @return the send, waiting for a thread of the call's executor
   */
  private Runnable startUntilItsSendWaits() throws InterruptedException {
    owner =
        guard(new AnsweredLate(store, clock, LEASE.multipliedBy(3).dividedBy(4)))
            .blockingStoreExecutor(steps.storeCalls())
            .build();
    first =
        owner
            .executeForOutcomeAsync(
                IdempotencyRequest.of(key, TTL),
                ResultCodec.string(),
                ctx -> CompletableFuture.completedFuture("owner-" + sends.incrementAndGet()),
                steps.callSteps())
            .toCompletableFuture();
    steps.nextStoreCall().run();
    steps.nextCallStep().run();
    steps.nextStoreCall().run();
    return steps.nextCallStep();
  }

  /**
   * A store whose claims are answered {@code late} after they took effect, by the guards' clock.
   */
  static final class AnsweredLate extends ForwardingKeyStore {
    private final MutableClock clock;
    private final Duration late;

    AnsweredLate(KeyStore delegate, MutableClock clock, Duration late) {
      super(delegate);
      this.clock = clock;
      this.late = late;
    }

    @Override
    public ClaimResult claim(ClaimRequest request) {
      ClaimResult answer = delegate.claim(request);
      clock.advance(late);
      return answer;
    }
  }
}
