package dev.idempotency.tck;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.KeyStoreException;
import dev.idempotency.SendContext;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.KeyStore;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A lease-keeper renewal the client gave up on (timed out: sent, not answered) that reaches the
 * store after a newer renewal must not move the stored lease back (SPEC 1), on a store whose extend
 * sets the lease from the request's time.
 *
 * <p>probeF: the fix of 1ef3b83 keeps a claim's renewals from overlapping on the client: a {@code
 * renewNow} waits for the keeper's renewal until the store call returns. A call that returns
 * because the client gave up does not take its request back: the store may still apply it. Here
 * guard A's store passes every request on except the keeper's, which the test takes as "sent, and
 * the client timed out" (a {@link KeyStoreException} to the keeper) and delivers to the store
 * later, as the network would. Lease 4 s, clocks moved by hand: A claims at T0; the keeper's
 * renewal (request time T0) times out; at T0+3.5 s A's async sender asks {@code leaseHeld()}, which
 * renews (T0+7.5 s, guard and store) and the provider call starts; then the keeper's request lands
 * (T0+4 s); the keeper's later renewals keep timing out; at T0+5 s guard B claims the key, with A's
 * lease live by A's estimate until T0+7.5 s. Before the fix (fixlease: an extend never moves a
 * lease back) guard B took the key over and sent: "sends (the keeper's timed-out renewal landed
 * late: [true]; B got: b-2; A got: a-sent) expected: 1 but was: 2".
 *
 * <p>Extend it with a store: implement {@link #newStore()}, and {@link #closeStore(KeyStore)} if
 * the store holds resources.
 */
public abstract class TimedOutRenewalLandsLateContract {

  /** The idempotency window of the key. */
  protected static final Duration TTL = Duration.ofHours(1);

  /** The guards' lease. */
  protected static final Duration LEASE = Duration.ofSeconds(4);

  private static final Duration WAIT_LIMIT = Duration.ofSeconds(60);

  private final MutableClock time = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  private final AtomicBoolean keeperTimesOut = new AtomicBoolean(true);
  private final AtomicReference<List<ExtendRequest>> inTheNetwork = new AtomicReference<>();
  private final ExecutorService providerThread =
      Executors.newSingleThreadExecutor(r -> new Thread(r, "provider-call"));
  private KeyStore store;
  private IdempotencyGuard guardA;
  private IdempotencyGuard guardB;

  /** A fresh store under test, its lease set from the request's time. */
  protected abstract KeyStore newStore();

  /** Releases what {@link #newStore()} opened; nothing by default. */
  protected void closeStore(KeyStore store) {}

  @BeforeEach
  void startGuards() {
    store = newStore();
    KeyStore network =
        new ForwardingKeyStore(store) {
          @Override
          public List<Boolean> extendAll(List<ExtendRequest> requests) {
            if (keeperTimesOut.get() && Thread.currentThread().getName().contains("lease-keeper")) {
              inTheNetwork.compareAndSet(null, List.copyOf(requests));
              throw new KeyStoreException(
                  "probeF: the renewal timed out (sent, not answered)", null);
            }
            return delegate.extendAll(requests);
          }
        };
    guardA = guard(network);
    guardB = guard(store);
  }

  private IdempotencyGuard guard(KeyStore keyStore) {
    return IdempotencyGuard.builder()
        .store(keyStore)
        .clock(time)
        .lease(LEASE)
        .inFlightWait(Duration.ZERO)
        .build();
  }

  @AfterEach
  void closeGuards() {
    keeperTimesOut.set(false);
    providerThread.shutdownNow();
    if (guardA != null) {
      guardA.close();
    }
    if (guardB != null) {
      guardB.close();
    }
    if (store != null) {
      closeStore(store);
    }
  }

  @Test
  void aTimedOutKeeperRenewalLandingAfterANewerOneDoesNotLetAnotherGuardTakeOverMidSend()
      throws Exception {
    String key = "late-renewal:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    AtomicReference<SendContext> context = new AtomicReference<>();
    CompletableFuture<String> providerCall = new CompletableFuture<>();
    CompletableFuture<String> a =
        guardA
            .executeAsync(
                key,
                TTL,
                ctx -> {
                  context.set(ctx);
                  return providerCall;
                })
            .toCompletableFuture();
    long deadline = System.nanoTime() + WAIT_LIMIT.toNanos();
    while (inTheNetwork.get() == null && System.nanoTime() < deadline) {
      Thread.sleep(10); // bounded polling: the keeper's first renewal (request time T0)
    }
    assertThat(inTheNetwork.get())
        .as("the keeper's renewal (request time T0) went out")
        .isNotNull();

    time.advance(Duration.ofMillis(3_500));
    boolean held = providerThread.submit(() -> context.get().leaseHeld()).get(60, TimeUnit.SECONDS);
    assertThat(held).as("lease held at T0+3.5 s (renewed to T0+7.5 s)").isTrue();
    sends.incrementAndGet(); // A's provider call starts

    List<Boolean> landed = store.extendAll(inTheNetwork.get()); // the older request lands now
    time.advance(Duration.ofMillis(1_500)); // T0+5 s
    String b;
    try {
      b = guardB.execute(key, TTL, other -> "b-" + sends.incrementAndGet());
    } catch (IdempotencyInProgressException inProgress) {
      b = "in progress";
    }
    keeperTimesOut.set(false);
    providerCall.complete("a-sent");
    String outcomeOfA;
    try {
      outcomeOfA = a.get(60, TimeUnit.SECONDS);
    } catch (ExecutionException e) {
      outcomeOfA = e.getCause().toString();
    }
    assertThat(sends)
        .as(
            "sends (the keeper's timed-out renewal landed late: %s; B got: %s; A got: %s)",
            landed, b, outcomeOfA)
        .hasValue(1);
    assertThat(landed)
        .as("the late renewal of a claim still held, already leased further: renewed, not lost")
        .containsExactly(true);
  }
}
