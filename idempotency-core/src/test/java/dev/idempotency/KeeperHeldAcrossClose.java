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
import java.util.List;
import java.util.UUID;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;

/**
 * The set-up of the probes in which a batch's hand-out waits in {@code renewNow} for the keeper's
 * renewal of its key while the guard closes ({@link RenewNowDuringCloseProbeTest}, {@link
 * NextRenewingDuringCloseProbeTest}): an in-memory store that holds the lease keeper's first
 * renewal until {@link #letKeeperGo} (a store call the close's interrupt does not end, as the
 * deferred interrupt of a renewal lets a real store call run to its own timeout); a guard on it,
 * lease 4 s, close grace 300 ms, its clock moved by hand; and the caller thread of the hand-out.
 */
abstract class KeeperHeldAcrossClose {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofSeconds(4);

  final MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final CountDownLatch keeperHeld = new CountDownLatch(1);
  final CountDownLatch letKeeperGo = new CountDownLatch(1);
  private final AtomicBoolean holding = new AtomicBoolean(true);
  final ForwardingKeyStore store =
      new ForwardingKeyStore(InMemoryKeyStore.builder().build()) {
        @Override
        public List<Boolean> extendAll(List<ExtendRequest> requests) {
          if (Thread.currentThread().getName().contains("lease-keeper")
              && holding.compareAndSet(true, false)) {
            keeperHeld.countDown();
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
  private final ExecutorService caller =
      Executors.newSingleThreadExecutor(r -> new Thread(r, "batch-caller"));

  @AfterEach
  void close() {
    letKeeperGo.countDown();
    caller.shutdownNow();
    guard.close();
  }

  /** Claims two keys, {@code prefix:<a new id>:0} and {@code :1}, as one batch. */
  Batch<String> claimTwo(String prefix) {
    String id = UUID.randomUUID().toString();
    List<IdempotencyRequest> requests = new ArrayList<>();
    for (int i = 0; i < 2; i++) {
      requests.add(IdempotencyRequest.of(prefix + ":" + id + ":" + i, TTL));
    }
    return guard.claimBatch(requests, ResultCodec.string());
  }

  /** Fails unless the keeper's renewal reaches the store, where it is held, within 30 s. */
  void awaitTheKeeperHeld() throws InterruptedException {
    assertThat(keeperHeld.await(30, TimeUnit.SECONDS)).as("the keeper's renewal is held").isTrue();
  }

  /**
   * Runs the hand-out on the caller thread and returns once that thread waits (within 60 s).
   *
   * @param waits what the wait is, for the failure's message
   */
  Future<String> handOutOnceItWaits(String waits, Callable<String> handOut)
      throws InterruptedException {
    AtomicReference<Thread> handing = new AtomicReference<>();
    Future<String> answer =
        caller.submit(
            () -> {
              handing.set(Thread.currentThread());
              return handOut.call();
            });
    Poll.within(Duration.ofSeconds(60))
        .until(
            waits, () -> handing.get() != null && handing.get().getState() == Thread.State.WAITING);
    return answer;
  }

  /**
   * Closes the guard on another thread and fails if the close still runs after 20 s.
   *
   * @return how long the close took, in milliseconds
   */
  long closeTheGuard() throws InterruptedException {
    long start = System.nanoTime();
    Thread closer = new Thread(guard::close, "closer");
    closer.start();
    closer.join(20_000);
    long closeMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
    assertThat(closer.isAlive()).as("close still running after 20 s").isFalse();
    return closeMillis;
  }
}
