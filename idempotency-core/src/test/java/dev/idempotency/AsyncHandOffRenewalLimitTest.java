package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.tck.ForwardingKeyStore;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executor;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * Issue 37 (probeC on faultrun's fix: {@code AsyncGuardedCall.next} decides a late claim again once
 * its send gets a thread, {@code SendLease.keepUntilSend} renews it meanwhile): an {@code
 * executeAsync} call whose executor is busy for longer than {@code leaseRenewalLimit} each time the
 * call asks for a thread. The call's executor is run by hand; between two of its steps the test
 * waits for the renewal limit plus the lease (the pool busy with other work). The store is the
 * in-memory store seen as a blocking store (as a JDBC store is), so that its claim is answered on
 * the blocking-store executor and decided on the call's executor.
 *
 * <p>The promise checked (the builder's Javadoc of {@code leaseRenewalLimit}: "for how long, at
 * most, a claim is renewed"): a call that gets a thread after such a wait either sends or is
 * refused; it is not renewed again past the limit and sent back to wait for a thread.
 */
class AsyncHandOffRenewalLimitTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofMillis(400);
  static final Duration LIMIT = Duration.ofMillis(300);
  static final int PICKUPS = 4;

  final LinkedBlockingQueue<Runnable> handOffs = new LinkedBlockingQueue<>();
  final Executor byHand = handOffs::add;
  final AtomicInteger sends = new AtomicInteger();
  final AtomicInteger renewals = new AtomicInteger();
  final CountDownLatch answer = new CountDownLatch(1);

  @Test
  void aSendThatWaitsLongerThanTheRenewalLimitForEachThreadIsNotRenewedAndRequeuedForever()
      throws Exception {
    ForwardingKeyStore store =
        new ForwardingKeyStore(InMemoryKeyStore.builder().build()) {
          @Override
          public ClaimResult claim(ClaimRequest request) {
            try {
              assertThat(answer.await(30, TimeUnit.SECONDS)).as("the claim may answer").isTrue();
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
            }
            return super.claim(request);
          }

          @Override
          public boolean extend(ExtendRequest request) {
            renewals.incrementAndGet();
            return super.extend(request);
          }
        };
    try (IdempotencyGuard guard =
        IdempotencyGuard.builder()
            .store(store)
            .lease(LEASE)
            .leaseRenewalLimit(LIMIT)
            .inFlightWait(Duration.ZERO)
            .closeGracePeriod(Duration.ZERO)
            .build()) {
      String key = "hand-off-limit:" + UUID.randomUUID();
      CompletableFuture<Outcome<String>> call =
          guard
              .executeForOutcomeAsync(
                  IdempotencyRequest.of(key, TTL),
                  ResultCodec.string(),
                  ctx -> CompletableFuture.completedFuture("sent-" + sends.incrementAndGet()),
                  byHand)
              .toCompletableFuture();
      // answered only now, so that the answer is always handed to the call's executor (an answer
      // ready before the call looked would be decided on this thread: Stages.continueOn)
      answer.countDown();
      int pickups = 0;
      long startedAt = System.nanoTime();
      while (!call.isDone() && pickups < PICKUPS) {
        Runnable step = handOffs.poll(30, TimeUnit.SECONDS);
        assertThat(step).as("a step handed to the call's executor").isNotNull();
        // the executor is busy with other work: for five eighths of the lease before the claim
        // is decided (late, still live), then for longer than the renewal limit each time
        TimeUnit.MILLISECONDS.sleep(
            pickups == 0 ? LEASE.toMillis() * 5 / 8 : LIMIT.plus(LEASE).toMillis());
        step.run();
        pickups++;
        awaitNextStepOrEnd(call);
      }
      long heldMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - startedAt);
      boolean endedInTime = call.isDone();
      int sendsMeanwhile = sends.get();
      int renewalsMeanwhile = renewals.get();
      // the executor free again: the call's steps run as soon as they are handed over
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (!call.isDone() && System.nanoTime() - deadline < 0) {
        Runnable step = handOffs.poll(10, TimeUnit.MILLISECONDS);
        if (step != null) {
          step.run();
        }
      }
      assertThat(sends).as("provider sends of the key").hasValueLessThanOrEqualTo(1);
      assertThat(endedInTime)
          .as(
              "the call ended within %d threads it got, each after the first after a wait longer"
                  + " than the renewal limit of %d ms (meanwhile: sends %d, store renewals %d, over"
                  + " %d ms; once the executor was free: %s)",
              PICKUPS,
              LIMIT.toMillis(),
              sendsMeanwhile,
              renewalsMeanwhile,
              heldMillis,
              call.isDone() ? "the call sent " + sends.get() + " time(s)" : "still not ended")
          .isTrue();
    }
  }

  /** Waits (bounded) until the call handed a next step to its executor, or ended. */
  private void awaitNextStepOrEnd(CompletableFuture<?> call) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (handOffs.isEmpty() && !call.isDone() && System.nanoTime() - deadline < 0) {
      TimeUnit.MILLISECONDS.sleep(5); // polling, bounded above
    }
  }
}
