package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.tck.ForwardingKeyStore;
import dev.idempotency.tck.MutableClock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * probeF (SPEC 1, a thread hung and a claim never renewed again): since 1ef3b83 a renewal takes
 * each claim's renewal flag ({@code Claim.startRenewal}) for every claim of the list before the
 * first chunk goes to the store, and {@code LeaseKeeper.renew} ends the flags of a chunk in a
 * {@code finally}, but the flags of the chunks after it only on a normal return. An {@link Error}
 * from the store's {@code extendAll} (a {@code NoClassDefFoundError}, a {@code StackOverflowError}
 * in a driver) in one chunk leaves every later chunk's claims marked "renewal under way" for good:
 * the keeper skips them from then on ({@code dueForRenewal}), so their leases run out mid-send, and
 * the next {@code renewNow} of one of them (a batch's hand-out, {@code leaseHeld()}) waits in
 * {@code Claim.awaitNoRenewal} for ever. Before 1ef3b83 the keeper ended all its flags in a {@code
 * finally} and renewNow took none.
 *
 * <p>A batch of three keys on the in-memory store, chunks of one key; the guard's clock moved by
 * hand. The first key is sent; 3.5 s later (lease 4 s) the next hand-out renews the two others on
 * the calling thread; the store throws an Error for the first of them. The next hand-out then
 * renews the third key again.
 *
 * <p>CONFIRMED on probeF (c1701d4), severity high (a hung caller thread; the claim is never renewed
 * again, so a second guard takes the key over mid-send once its lease ends): fails after 20 s with
 * "HUNG: WAITING in app//dev.idempotency.Claim.awaitNoRenewal(Claim.java:134)".
 */
class RenewalErrorLeavesClaimBusyProbeTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofSeconds(4);

  final MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final AtomicBoolean failNext = new AtomicBoolean();
  final AtomicInteger extendCalls = new AtomicInteger();
  final ForwardingKeyStore store =
      new ForwardingKeyStore(InMemoryKeyStore.builder().build()) {
        @Override
        public int maxBatchSize() {
          return 1;
        }

        @Override
        public List<Boolean> extendAll(List<ExtendRequest> requests) {
          extendCalls.incrementAndGet();
          if (!Thread.currentThread().getName().contains("lease-keeper")
              && failNext.compareAndSet(true, false)) {
            throw new NoClassDefFoundError("probeF: a driver class failed to load");
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
          .build();
  final ExecutorService caller = Executors.newSingleThreadExecutor(r -> daemon(r, "batch-caller"));

  @AfterEach
  void close() {
    caller.shutdownNow();
    guard.close();
  }

  @Test
  void anErrorInOneRenewalChunkLeavesNoOtherClaimMarkedBusy() throws Exception {
    String id = UUID.randomUUID().toString();
    List<IdempotencyRequest> requests = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      requests.add(IdempotencyRequest.of("renew-error:" + id + ":" + i, TTL));
    }
    Batch<String> batch = guard.claimBatch(requests, ResultCodec.string());
    Iterator<Batch.Item> items = batch.toSend().iterator();
    Batch.Item first = items.next();
    batch.succeeded(first, "sent-0");

    clock.advance(Duration.ofMillis(3_500)); // 0.5 s left on the other two: renewed first
    failNext.set(true);
    Throwable thrown = null;
    try {
      items.hasNext();
      items.next();
    } catch (Error e) {
      thrown = e;
    }
    assertThat(thrown).as("the store's Error reaches the caller").isNotNull();

    // the application goes on (or another iteration does): the third key is renewed again
    Future<String> next =
        caller.submit(
            () -> {
              Iterator<Batch.Item> again = batch.toSend().iterator();
              return again.hasNext() ? again.next().key() : "nothing left";
            });
    String answer;
    try {
      answer = next.get(20, TimeUnit.SECONDS);
    } catch (TimeoutException e) {
      answer = "HUNG: " + describe();
    }
    assertThat(answer)
        .as("the next hand-out after an Error in one renewal chunk")
        .doesNotStartWith("HUNG");
    batch.close(); // the rest taken back
  }

  private String describe() {
    for (Thread t : Thread.getAllStackTraces().keySet()) {
      if (t.getName().equals("batch-caller")) {
        StackTraceElement[] stack = t.getStackTrace();
        return t.getState() + " in " + (stack.length > 2 ? stack[2] : "?");
      }
    }
    return "?";
  }

  private static Thread daemon(Runnable r, String name) {
    Thread t = new Thread(r, name);
    t.setDaemon(true);
    return t;
  }
}
