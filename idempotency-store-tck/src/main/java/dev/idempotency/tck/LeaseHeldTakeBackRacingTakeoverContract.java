package dev.idempotency.tck;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.IdempotencyRecord;
import dev.idempotency.KeyStoreException;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spi.RecordState;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * probeJ on fixlease (c49da6b7), SPEC 1: after {@code SendContext.leaseHeld()} answered {@code
 * false} and the sender returned normally, the guard takes the key back (fenced). Here another
 * guard has taken the lapsed key over and is mid-send when that happens: the take-back must not
 * delete or cut the other guard's claim (a third caller would then send again), and the other
 * guard's outcome must be what every repeat gets. One store (on the guard's clock) shared by two
 * guards on one hand-moved clock; the first guard's keeper renewals fail, so its lease lapses when
 * the clock says so.
 *
 * <p>Extend it with a store: implement {@link #newStore()}, and {@link #closeStore(KeyStore)} if
 * the store holds resources.
 */
public abstract class LeaseHeldTakeBackRacingTakeoverContract {

  /** The idempotency window of the keys. */
  protected static final Duration TTL = Duration.ofHours(1);

  /** The guards' lease. */
  protected static final Duration LEASE = Duration.ofSeconds(4);

  private final MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  private final ExecutorService otherCaller = Executors.newSingleThreadExecutor();
  private KeyStore store;
  private IdempotencyGuard first;
  private IdempotencyGuard second;

  /** A fresh store under test, its lease set from the request's time (the guard's clock). */
  protected abstract KeyStore newStore();

  /** Releases what {@link #newStore()} opened; nothing by default. */
  protected void closeStore(KeyStore store) {}

  @BeforeEach
  void startGuards() {
    store = newStore();
    KeyStore keeperFails =
        new ForwardingKeyStore(store) {
          @Override
          public boolean extend(ExtendRequest request) {
            return extendAll(List.of(request)).get(0);
          }

          @Override
          public List<Boolean> extendAll(List<ExtendRequest> requests) {
            if (Thread.currentThread().getName().contains("lease-keeper")) {
              throw new KeyStoreException("the store did not answer the keeper in time", null);
            }
            return delegate.extendAll(requests);
          }
        };
    first = guard(keeperFails);
    second = guard(store);
  }

  private IdempotencyGuard guard(KeyStore over) {
    return IdempotencyGuard.builder()
        .store(over)
        .clock(clock)
        .lease(LEASE)
        .inFlightWait(Duration.ZERO)
        .build();
  }

  @AfterEach
  void close() {
    otherCaller.shutdownNow();
    if (first != null) {
      first.close();
      second.close();
    }
    if (store != null) {
      closeStore(store);
    }
  }

  @Test
  /** The take-back leaves the takeover claimed; its outcome is replayed; one send. */
  void theTakeBackAfterNotSentLeavesAnotherGuardsTakeoverAlone() throws Exception {
    String key = "probe-take-back-vs-takeover:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    CountDownLatch otherSending = new CountDownLatch(1);
    CountDownLatch providerAnswers = new CountDownLatch(1);
    AtomicReference<Future<String>> other = new AtomicReference<>();
    boolean[] held = new boolean[1];

    Throwable firstCall =
        catchThrowable(
            () ->
                first.execute(
                    key,
                    TTL,
                    ctx -> {
                      clock.advance(LEASE.plusSeconds(1)); // the task waited past the lease
                      other.set(
                          otherCaller.submit(
                              () ->
                                  second.execute(
                                      key,
                                      TTL,
                                      ctx2 -> {
                                        otherSending.countDown();
                                        providerAnswers.await();
                                        return "sent-" + sends.incrementAndGet();
                                      })));
                      if (!otherSending.await(30, TimeUnit.SECONDS)) {
                        throw new AssertionError("the other guard never took the key over");
                      }
                      held[0] = ctx.leaseHeld();
                      return held[0] ? "sent-" + sends.incrementAndGet() : "not sent";
                    }));

    assertThat(held[0]).as("leaseHeld() after another guard took the key over").isFalse();
    assertThat(firstCall).isInstanceOf(KeyStoreException.class);
    assertThat(second.find(key).map(IdempotencyRecord::state))
        .as("the other guard's claim, after the first guard's take-back")
        .contains(RecordState.IN_PROGRESS);
    assertThat(catchThrowable(() -> first.execute(key, TTL, c -> "third-" + sends.get())))
        .as("a third caller while the other guard sends")
        .isInstanceOf(IdempotencyInProgressException.class);

    providerAnswers.countDown();
    assertThat(other.get().get(30, TimeUnit.SECONDS)).isEqualTo("sent-1");
    assertThat(first.execute(key, TTL, c -> "repeat-" + sends.incrementAndGet()))
        .isEqualTo("sent-1");
    assertThat(sends).hasValue(1);
  }
}
