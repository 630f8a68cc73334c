package dev.idempotency.tck;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.KeyStoreException;
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
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * probeJ (SPEC 1, no lost send): {@code SendContext.leaseHeld()} renews a claim that is due, and a
 * renewal the store failed (not refused) marked the claim lost, so it answered {@code false}
 * although the record was still this call's. A sender that then "sent nothing", as the Javadoc
 * says, and returned normally had its result recorded as the key's outcome: every repeat replayed
 * it and the message never went out ("[the message went out once (first: not sent, repeat: not
 * sent)] Expecting AtomicInteger(0) to have value: 1", in memory, before the fix).
 *
 * <p>Now a renewal the store fails before a send is tried once more at once (a momentary failure is
 * not another owner), and once {@code leaseHeld()} has answered {@code false} to a send, a normal
 * return means "not sent": the result is not recorded, the key is taken back, fenced, and the
 * caller gets a {@link KeyStoreException}; the retry sends once.
 *
 * <p>The store under test sits behind one whose renewals on the lease keeper's threads always fail
 * (so the keeper's schedule, in real time, never renews the claim in the test's stead) and whose
 * renewals on other threads fail as often as a case asks. Lease 4 s, the guard's clock moved by
 * hand (the store on the guard's clock): the sender's task waited 3.5 s, so the check renews first.
 *
 * <p>Extend it with a store: implement {@link #newStore()}, and {@link #closeStore(KeyStore)} if
 * the store holds resources.
 */
public abstract class LeaseHeldFailedRenewalContract {

  /** The idempotency window of the keys. */
  protected static final Duration TTL = Duration.ofHours(1);

  /** The guard's lease. */
  protected static final Duration LEASE = Duration.ofSeconds(4);

  private final MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  private final AtomicInteger failRenewals = new AtomicInteger();
  private final AtomicInteger renewalsAsked = new AtomicInteger();
  private final ExecutorService providerThread =
      Executors.newSingleThreadExecutor(r -> new Thread(r, "provider-call"));
  private KeyStore store;
  private IdempotencyGuard guard;

  /** A fresh store under test, its lease set from the request's time (the guard's clock). */
  protected abstract KeyStore newStore();

  /** Releases what {@link #newStore()} opened; nothing by default. */
  protected void closeStore(KeyStore store) {}

  @BeforeEach
  void startGuard() {
    store = newStore();
    KeyStore failing =
        new ForwardingKeyStore(store) {
          @Override
          public boolean extend(ExtendRequest request) {
            failIfAsked();
            return delegate.extend(request);
          }

          @Override
          public List<Boolean> extendAll(List<ExtendRequest> requests) {
            failIfAsked();
            return delegate.extendAll(requests);
          }

          private void failIfAsked() {
            if (Thread.currentThread().getName().contains("lease-keeper")) {
              throw new KeyStoreException("the store did not answer the keeper in time", null);
            }
            renewalsAsked.incrementAndGet();
            if (failRenewals.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
              throw new KeyStoreException("the store did not answer in time", null);
            }
          }
        };
    guard =
        IdempotencyGuard.builder()
            .store(failing)
            .clock(clock)
            .lease(LEASE)
            .inFlightWait(Duration.ZERO)
            .build();
  }

  @AfterEach
  void closeGuard() {
    providerThread.shutdownNow();
    if (guard != null) {
      guard.close();
    }
    if (store != null) {
      closeStore(store);
    }
  }

  /** One failed renewal is tried again at once: the lease is held, the message goes out once. */
  @Test
  void aRenewalTheStoreFailsOnceIsTriedAgainAndTheMessageGoesOutOnce() {
    String key = "lease-held-one-failure:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();

    String first =
        guard.execute(
            key,
            TTL,
            ctx -> {
              clock.advance(Duration.ofMillis(3500)); // the provider call waited on a task
              failRenewals.set(1);
              return ctx.leaseHeld() ? "sent-" + sends.incrementAndGet() : "not sent";
            });
    String again = guard.execute(key, TTL, ctx -> "repeat-" + sends.incrementAndGet());

    assertThat(first).isEqualTo("sent-1");
    assertThat(again).as("the repeat replays the send").isEqualTo("sent-1");
    assertThat(renewalsAsked).as("the failed renewal and its second try").hasValue(2);
    assertThat(sends).hasValue(1);
  }

  /**
   * The store fails the renewal and its second try: {@code leaseHeld()} answers {@code false}, the
   * sender sends nothing and returns. The result is not recorded, the caller learns nothing was
   * sent, and the retry sends once (before the fix: no send at all, the "not sent" result
   * replayed).
   */
  @Test
  void aSenderToldTheLeaseIsNotHeldThatReturnsDoesNotLoseTheSend() {
    String key = "lease-held-failed-renewal:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();

    Throwable first =
        catchThrowable(
            () ->
                guard.execute(
                    key,
                    TTL,
                    ctx -> {
                      clock.advance(Duration.ofMillis(3500));
                      failRenewals.set(2);
                      return ctx.leaseHeld() ? "sent-" + sends.incrementAndGet() : "not sent";
                    }));

    assertThat(first)
        .as("the caller learns nothing was sent")
        .isInstanceOf(KeyStoreException.class)
        .hasMessageContaining("nothing was sent");
    assertThat(guard.find(key)).as("the key taken back for the retry").isEmpty();
    String again = guard.execute(key, TTL, ctx -> "sent-" + sends.incrementAndGet());
    assertThat(again).isEqualTo("sent-1");
    assertThat(sends).as("the message went out once").hasValue(1);
  }

  /**
   * The same through {@code executeAsync}, the provider call on a task that checks {@code
   * leaseHeld()} before it would start: the stage fails with a {@link KeyStoreException}, and the
   * retry sends once.
   */
  @Test
  void anAsyncSenderToldTheLeaseIsNotHeldThatCompletesDoesNotLoseTheSend() throws Exception {
    String key = "lease-held-failed-renewal-async:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();

    CompletableFuture<String> first =
        guard
            .executeAsync(
                key,
                TTL,
                ctx ->
                    CompletableFuture.supplyAsync(
                        () -> {
                          clock.advance(Duration.ofMillis(3500));
                          failRenewals.set(2);
                          return ctx.leaseHeld() ? "sent-" + sends.incrementAndGet() : "not sent";
                        },
                        providerThread))
            .toCompletableFuture();
    Throwable failed = catchThrowable(() -> first.get(60, TimeUnit.SECONDS));

    assertThat(failed).isInstanceOf(ExecutionException.class);
    assertThat(failed.getCause())
        .as("the caller learns nothing was sent")
        .isInstanceOf(KeyStoreException.class)
        .hasMessageContaining("nothing was sent");
    String again =
        guard
            .executeAsync(
                key,
                TTL,
                ctx -> CompletableFuture.completedFuture("sent-" + sends.incrementAndGet()))
            .toCompletableFuture()
            .get(60, TimeUnit.SECONDS);
    assertThat(again).isEqualTo("sent-1");
    assertThat(sends).as("the message went out once").hasValue(1);
  }

  /** The same, the sender throwing when told the lease is not held: the retry sends once. */
  @Test
  void aSenderToldTheLeaseIsNotHeldThatThrowsIsSentByTheRetry() {
    String key = "lease-held-failed-renewal-throws:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();

    Throwable first =
        catchThrowable(
            () ->
                guard.execute(
                    key,
                    TTL,
                    ctx -> {
                      clock.advance(Duration.ofMillis(3500));
                      failRenewals.set(2);
                      if (!ctx.leaseHeld()) {
                        throw new IllegalStateException("lease not held: nothing sent");
                      }
                      return "sent-" + sends.incrementAndGet();
                    }));
    String again = guard.execute(key, TTL, ctx -> "sent-" + sends.incrementAndGet());

    assertThat(first).isInstanceOf(IllegalStateException.class);
    assertThat(again).isEqualTo("sent-1");
    assertThat(sends).hasValue(1);
  }
}
