package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.tck.ForwardingKeyStore;
import dev.idempotency.tck.MutableClock;
import dev.idempotency.testservers.Poll;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * probeF (SPEC 1 and the application's interrupt): an async sender's {@code leaseHeld()} that waits
 * for the keeper's renewal on its way ({@code Claim.awaitNoRenewal}) and is interrupted meanwhile
 * (the application cancels the task) goes on waiting, then renews, answers, and returns with the
 * thread's interrupt status set: the interrupt is kept for the application, and the renewal is not
 * sent beside the keeper's. Lease 4 s, the guard's clock moved by hand, the keeper's first renewal
 * held in the store until the test lets it go.
 */
class InterruptWhileAwaitingRenewalProbeTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofSeconds(4);

  final MutableClock time = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final CountDownLatch keeperHeld = new CountDownLatch(1);
  final CountDownLatch letKeeperGo = new CountDownLatch(1);
  final AtomicBoolean holding = new AtomicBoolean(true);
  final AtomicBoolean besideKeeper = new AtomicBoolean();
  final ForwardingKeyStore store =
      new ForwardingKeyStore(InMemoryKeyStore.builder().build()) {
        @Override
        public List<Boolean> extendAll(List<ExtendRequest> requests) {
          boolean keeper = Thread.currentThread().getName().contains("lease-keeper");
          if (keeper && holding.compareAndSet(true, false)) {
            keeperHeld.countDown();
            try {
              letKeeperGo.await(60, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
            }
            return delegate.extendAll(requests);
          }
          if (!keeper && letKeeperGo.getCount() == 1) {
            besideKeeper.set(true);
          }
          return delegate.extendAll(requests);
        }
      };
  final IdempotencyGuard guard =
      IdempotencyGuard.builder()
          .store(store)
          .clock(time)
          .lease(LEASE)
          .inFlightWait(Duration.ZERO)
          .build();

  @AfterEach
  void close() {
    letKeeperGo.countDown();
    guard.close();
  }

  @Test
  void anInterruptWhileWaitingForTheKeepersRenewalIsKeptAndNothingOverlaps() throws Exception {
    AtomicReference<SendContext> context = new AtomicReference<>();
    CompletableFuture<String> providerCall = new CompletableFuture<>();
    CompletableFuture<String> call =
        guard
            .executeAsync(
                "interrupt-await:" + UUID.randomUUID(),
                TTL,
                ctx -> {
                  context.set(ctx);
                  return providerCall;
                })
            .toCompletableFuture();
    assertThat(keeperHeld.await(30, TimeUnit.SECONDS)).isTrue();
    time.advance(Duration.ofMillis(3_500)); // less than the margin left: leaseHeld() renews

    AtomicReference<Boolean> held = new AtomicReference<>();
    AtomicBoolean interruptedAfter = new AtomicBoolean();
    Thread checker =
        new Thread(
            () -> {
              held.set(context.get().leaseHeld());
              interruptedAfter.set(Thread.currentThread().isInterrupted());
            },
            "sender-task");
    checker.start();
    Poll.within(Duration.ofSeconds(60))
        .until("the check waits for the keeper", () -> checker.getState() == Thread.State.WAITING);
    checker.interrupt();
    Thread.sleep(100); // it must go on waiting, not renew beside the keeper
    assertThat(besideKeeper).as("renewed beside the keeper's renewal").isFalse();
    letKeeperGo.countDown();
    checker.join(60_000);

    assertThat(checker.isAlive()).isFalse();
    assertThat(held.get()).as("lease held after the wait").isTrue();
    assertThat(interruptedAfter).as("the application's interrupt kept").isTrue();
    providerCall.complete("sent");
    assertThat(call.get(60, TimeUnit.SECONDS)).isEqualTo("sent");
  }
}
