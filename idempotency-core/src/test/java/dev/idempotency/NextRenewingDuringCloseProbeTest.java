package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.tck.ForwardingKeyStore;
import dev.idempotency.tck.MutableClock;
import dev.idempotency.testservers.Poll;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * probeT (SPEC 1): {@code RenewNowDuringCloseProbeTest} for {@code next()} rather than {@code
 * hasNext()}: a loop reserved key 1 in {@code hasNext()}; when it calls {@code next()}, the check
 * there ({@code BatchHandOut.stillLive}) must renew key 1 and waits in {@code renewNow} for the
 * keeper's renewal of it, which the store holds; meanwhile the guard closes (grace 300 ms) and
 * gives up. Once the store answers the keeper, {@code next()} must hand nothing out: the guard gave
 * up, no send may start on a lease nobody renews (the check of {@code
 * BatchReservedKeyAfterCloseProbeTest} made before the wait missed this). Lease 4 s, the guard's
 * clock moved by hand.
 */
class NextRenewingDuringCloseProbeTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofSeconds(4);

  final MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final CountDownLatch keeperHeld = new CountDownLatch(1);
  final CountDownLatch letKeeperGo = new CountDownLatch(1);
  final AtomicBoolean holding = new AtomicBoolean(true);
  final ForwardingKeyStore store =
      new ForwardingKeyStore(InMemoryKeyStore.builder().build()) {
        @Override
        public List<Boolean> extendAll(List<ExtendRequest> requests) {
          if (Thread.currentThread().getName().contains("lease-keeper")
              && holding.compareAndSet(true, false)) {
            keeperHeld.countDown();
            // a store call the close's interrupt does not end (as the deferred interrupt of a
            // renewal lets a real store call run to its own timeout)
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (letKeeperGo.getCount() > 0 && System.nanoTime() - until < 0) {
              try {
                letKeeperGo.await(100, TimeUnit.MILLISECONDS);
              } catch (InterruptedException e) {
                // kept going, as a store call does
              }
            }
          }
          return delegate.extendAll(requests);
        }
      };
  final IdempotencyGuard guard =
      IdempotencyGuard.builder()
          .store(store)
          .clock(clock)
          .lease(LEASE)
          .inFlightWait(Duration.ZERO)
          .closeGracePeriod(Duration.ofMillis(300))
          .build();
  final ExecutorService caller =
      Executors.newSingleThreadExecutor(r -> new Thread(r, "batch-caller"));

  @AfterEach
  void close() {
    letKeeperGo.countDown();
    caller.shutdownNow();
    guard.close();
  }

  // probeT: failed on c8a7ab8 (low: a send on a lease nobody renews, which
  // BatchReservedKeyAfterCloseProbeTest shows leads to a second send), in-memory store: "[next()
  // after the close gave up] expected: "nothing handed out" but was: "handed out
  // next-renew-close:...:0"": the gaveUp() check of next() ran before the renewal wait of
  // stillLive. FIXED: Batch.Item.markHandedOut refuses once the guard gave up.
  @Test
  void aNextWaitingForTheKeeperAcrossTheCloseHandsNothingOut() throws Exception {
    String id = UUID.randomUUID().toString();
    List<IdempotencyRequest> requests = new ArrayList<>();
    for (int i = 0; i < 2; i++) {
      requests.add(IdempotencyRequest.of("next-renew-close:" + id + ":" + i, TTL));
    }
    Batch<String> batch = guard.claimBatch(requests, ResultCodec.string());
    Iterator<Batch.Item> items = batch.toSend().iterator();
    assertThat(items.hasNext()).as("key 0 is reserved").isTrue();
    assertThat(keeperHeld.await(30, TimeUnit.SECONDS)).as("the keeper's renewal is held").isTrue();

    clock.advance(Duration.ofMillis(3_500)); // next() renews key 0 first: waits for the keeper
    AtomicReference<Thread> handing = new AtomicReference<>();
    Future<String> next =
        caller.submit(
            () -> {
              handing.set(Thread.currentThread());
              try {
                return "handed out " + items.next().key();
              } catch (java.util.NoSuchElementException e) {
                return "nothing handed out";
              }
            });
    Poll.within(Duration.ofSeconds(60))
        .until(
            "next() waits for the keeper",
            () -> handing.get() != null && handing.get().getState() == Thread.State.WAITING);

    Thread closer = new Thread(guard::close, "closer");
    closer.start();
    closer.join(20_000);
    assertThat(closer.isAlive()).as("close still running after 20 s").isFalse();

    letKeeperGo.countDown();
    String answer = next.get(30, TimeUnit.SECONDS);
    assertThat(answer).as("next() after the close gave up").isEqualTo("nothing handed out");
    batch.record();
  }
}
