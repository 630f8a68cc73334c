package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.ForwardingKeyStore;
import dev.idempotency.tck.MutableClock;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * probeO on b08ce61f ({@code Claim.answerLeaseHeld}: the {@code leaseHeld()} checks of one claim
 * answered one at a time under a lock held across the renewal's store call), SPEC 1, in memory: an
 * interrupt of an asker waiting for that lock, and a store that hangs during the renewal while the
 * guard closes. Lease 4 s, the guards' clock moved by hand; the store fails the keeper's renewals
 * (so it never renews in the asker's stead) and holds a caller's renewal when asked.
 */
class LeaseHeldLockInterruptAndHangProbeTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofSeconds(4);
  static final long WAIT_S = 60;

  final MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final KeyStore store = InMemoryKeyStore.builder().build();
  final AtomicReference<CountDownLatch> holdNextRenewal = new AtomicReference<>();
  final CountDownLatch renewalHeld = new CountDownLatch(1);
  final AtomicBoolean heldRenewalAnswersLate = new AtomicBoolean();
  final ExecutorService tasks = Executors.newFixedThreadPool(4);

  final KeyStore probed =
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
          CountDownLatch hold = holdNextRenewal.getAndSet(null);
          if (hold != null) {
            renewalHeld.countDown();
            try {
              if (!hold.await(WAIT_S, TimeUnit.SECONDS)) {
                throw new AssertionError("the held renewal was never let go");
              }
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
              throw new KeyStoreException("interrupted while renewing", e);
            }
          }
          List<Boolean> answer = delegate.extendAll(requests);
          if (hold != null && heldRenewalAnswersLate.get()) {
            clock.advance(Duration.ofMillis(3500)); // renewed, but the answer came late
          }
          return answer;
        }
      };

  final IdempotencyGuard guard = guard(probed, Duration.ofMillis(300));
  final IdempotencyGuard other = guard(store, Duration.ofSeconds(5));

  IdempotencyGuard guard(KeyStore over, Duration grace) {
    return IdempotencyGuard.builder()
        .store(over)
        .clock(clock)
        .lease(LEASE)
        .inFlightWait(Duration.ZERO)
        .closeGracePeriod(grace)
        .build();
  }

  @AfterEach
  void close() {
    CountDownLatch held = holdNextRenewal.getAndSet(null);
    if (held != null) {
      held.countDown();
    }
    tasks.shutdownNow();
    guard.close();
    other.close();
  }

  /**
   * Task one asks while the renewal is due; its renewal is held, then answered late (told {@code
   * false}). Task two asks meanwhile, waits for the lock, and is interrupted while it waits. Both
   * must be told {@code false} (one {@code true} would send while the call counts as not sent), the
   * interrupt kept, and the retry sends once.
   */
  @Test
  void anInterruptedWaitingAskerGetsTheSameFalseAndTheRetrySendsOnce() throws Exception {
    heldRenewalAnswersLate.set(true);
    String key = "probe-o-lease-held-interrupt:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    StringBuffer answers = new StringBuffer();
    AtomicBoolean twoKeptInterrupt = new AtomicBoolean();

    Throwable first =
        catchThrowable(
            () ->
                guard.execute(
                    key,
                    TTL,
                    ctx -> {
                      clock.advance(Duration.ofMillis(3500)); // renewal due
                      CountDownLatch letGo = new CountDownLatch(1);
                      holdNextRenewal.set(letGo);
                      AtomicBoolean sent = new AtomicBoolean();
                      Future<String> one =
                          tasks.submit(() -> askThenSend(ctx, sent, sends, answers, "one"));
                      if (!renewalHeld.await(WAIT_S, TimeUnit.SECONDS)) {
                        throw new AssertionError("task one never renewed");
                      }
                      AtomicReference<Thread> asker = new AtomicReference<>();
                      Future<String> two =
                          tasks.submit(
                              () -> {
                                asker.set(Thread.currentThread());
                                String r = askThenSend(ctx, sent, sends, answers, "two");
                                twoKeptInterrupt.set(Thread.currentThread().isInterrupted());
                                return r;
                              });
                      awaitWaiting(asker);
                      asker.get().interrupt(); // task two is cancelled while it waits
                      letGo.countDown();
                      String a = one.get(WAIT_S, TimeUnit.SECONDS);
                      String b = two.get(WAIT_S, TimeUnit.SECONDS);
                      return a.startsWith("sent") ? a : b;
                    }));
    String retry = guard.execute(key, TTL, ctx -> "sent-" + sends.incrementAndGet());

    assertThat(sends)
        .as(
            "sends within the window (answers: %s; first call: %s; retry: %s)",
            answers, first, retry)
        .hasValue(1);
    assertThat(answers.toString()).contains("one=false").contains("two=false");
    assertThat(twoKeptInterrupt).as("task two's interrupt kept").isTrue();
  }

  /**
   * Task one asks while the renewal is due and its renewal hangs in the store; task two asks and
   * waits for the lock; task one is interrupted (cancelled) in the store call, which the store
   * answers with a failure, as a driver does. Whatever task one is told, task two must be told the
   * same when one of them is {@code false}, and the message goes out once with the retry.
   */
  @Test
  void anInterruptOfTheAskerHoldingTheLockLeavesOneAnswer() throws Exception {
    String key = "probe-o-lease-held-interrupt-holder:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    StringBuffer answers = new StringBuffer();

    Throwable first =
        catchThrowable(
            () ->
                guard.execute(
                    key,
                    TTL,
                    ctx -> {
                      clock.advance(Duration.ofMillis(3500)); // renewal due
                      CountDownLatch neverLetGo = new CountDownLatch(1);
                      holdNextRenewal.set(neverLetGo);
                      AtomicBoolean sent = new AtomicBoolean();
                      AtomicReference<Thread> holder = new AtomicReference<>();
                      Future<String> one =
                          tasks.submit(
                              () -> {
                                holder.set(Thread.currentThread());
                                return askThenSend(ctx, sent, sends, answers, "one");
                              });
                      if (!renewalHeld.await(WAIT_S, TimeUnit.SECONDS)) {
                        throw new AssertionError("task one never renewed");
                      }
                      AtomicReference<Thread> asker = new AtomicReference<>();
                      Future<String> two =
                          tasks.submit(
                              () -> {
                                asker.set(Thread.currentThread());
                                return askThenSend(ctx, sent, sends, answers, "two");
                              });
                      awaitWaiting(asker);
                      holder.get().interrupt(); // task one cancelled in the store call
                      String a = one.get(WAIT_S, TimeUnit.SECONDS);
                      String b = two.get(WAIT_S, TimeUnit.SECONDS);
                      return a.startsWith("sent") ? a : b;
                    }));
    String retry = guard.execute(key, TTL, ctx -> "sent-" + sends.incrementAndGet());

    assertThat(sends)
        .as(
            "sends within the window (answers: %s; first call: %s; retry: %s)",
            answers, first, retry)
        .hasValue(1);
    assertThat(answers.toString())
        .as("one told false and the other true")
        .satisfiesAnyOf(
            a -> assertThat(a).doesNotContain("false"), a -> assertThat(a).doesNotContain("true"));
  }

  /**
   * The sender's renewal hangs in the store (the asker holds the lock across it) and the guard
   * closes: close() returns within its bounds, not waiting for the store. The store then answers in
   * time, the sender is told {@code true} and sends, after the close abandoned its call. The
   * message must still go out once: a repeat by another guard, refused while the key is claimed,
   * and again after the lease has surely run out, replays or waits, never sends again.
   */
  @Test
  void aRenewalHangingWhileTheGuardClosesSendsOnce() throws Exception {
    String key = "probe-o-lease-held-hang:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    AtomicReference<Boolean> told = new AtomicReference<>();
    CountDownLatch letGo = new CountDownLatch(1);
    Future<String> call =
        tasks.submit(
            () ->
                guard.execute(
                    key,
                    TTL,
                    ctx -> {
                      clock.advance(Duration.ofMillis(3500)); // renewal due
                      holdNextRenewal.set(letGo);
                      boolean held = ctx.leaseHeld(); // hangs in the store
                      told.set(held);
                      return held ? "sent-" + sends.incrementAndGet() : "not sent";
                    }));
    assertThat(renewalHeld.await(WAIT_S, TimeUnit.SECONDS)).as("the renewal held").isTrue();

    long start = System.nanoTime();
    Future<?> closing = tasks.submit(guard::close);
    Throwable closeOutcome = catchThrowable(() -> closing.get(WAIT_S, TimeUnit.SECONDS));
    long closeMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
    assertThat(closeOutcome).as("close() while the renewal hangs (%d ms)", closeMillis).isNull();

    letGo.countDown(); // the store answers, in time
    Throwable callOutcome = catchThrowable(() -> call.get(WAIT_S, TimeUnit.SECONDS));
    String callResult = callOutcome == null ? call.get() : null;

    Throwable repeatAtOnce =
        catchThrowable(() -> other.execute(key, TTL, ctx -> "sent-" + sends.incrementAndGet()));
    clock.advance(LEASE.multipliedBy(3)); // any lease left has run out
    Throwable repeatLater =
        catchThrowable(() -> other.execute(key, TTL, ctx -> "sent-" + sends.incrementAndGet()));
    assertThat(sends)
        .as(
            "sends within the window (close took %d ms; told %s; call: %s %s; repeat at once: %s;"
                + " repeat after the lease: %s; record: %s)",
            closeMillis,
            told.get(),
            callResult,
            callOutcome,
            repeatAtOnce,
            repeatLater,
            other.find(key))
        .hasValue(1);
  }

  private static String askThenSend(
      SendContext ctx, AtomicBoolean sent, AtomicInteger sends, StringBuffer answers, String name) {
    boolean held = ctx.leaseHeld();
    answers.append(name).append('=').append(held).append(' ');
    if (held && sent.compareAndSet(false, true)) {
      return "sent-" + sends.incrementAndGet();
    }
    return "not sent";
  }

  /** Waits, bounded, until the second asker waits for the first one's renewal. */
  private static void awaitWaiting(AtomicReference<Thread> asker) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
    while (true) {
      Thread thread = asker.get();
      if (thread != null && thread.getState() == Thread.State.WAITING) {
        return;
      }
      if (System.nanoTime() - deadline >= 0) {
        throw new AssertionError("the second task never waited for the first one's renewal");
      }
      TimeUnit.MILLISECONDS.sleep(10); // a polling pause, bounded above
    }
  }
}
