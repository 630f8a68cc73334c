package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spi.StoredRecord;
import dev.idempotency.tck.ForwardingKeyStore;
import dev.idempotency.tck.MutableClock;
import dev.idempotency.testservers.Poll;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * Issue 37 (SPEC 1, 14): {@code close()} and a background outcome write ({@link PendingOutcomes})
 * still in the store when the close grace passes. The write is never interrupted: {@code close()}
 * waits for its answer (bounded), then abandons exactly once what was not written, and reports all
 * of it (events, the one WARN) before it returns. On the in-memory store behind a blocking face:
 * the call's own writes fail (the store down), the background write is applied and its answer held
 * by the test, interruptibly as a driver that honours interrupts (RedisKeyStore's sync wait) or not
 * at all as a store that never answers. The same on PostgreSQL: {@code
 * PostgresOutcomeWriteRetryTest.aWriteInTheDatabaseWhenTheGracePassesIsAbandonedBeforeCloseReturns}.
 */
class PendingOutcomeCloseTest {

  static final Duration TTL = Duration.ofHours(1);

  /** What the background write does once the store applied it, before it answers. */
  @FunctionalInterface
  interface Answer {
    void await() throws InterruptedException;
  }

  final MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final InMemoryKeyStore memory = InMemoryKeyStore.builder().build();
  final AtomicBoolean failCallerWrites = new AtomicBoolean(true);
  final CountDownLatch backgroundWriteApplied = new CountDownLatch(1);
  final CountDownLatch backgroundWriteAnswered = new CountDownLatch(1);
  final AtomicInteger interruptedWrites = new AtomicInteger();
  final List<Type> events = new CopyOnWriteArrayList<>();
  volatile Answer answer;

  final ForwardingKeyStore store =
      new ForwardingKeyStore(memory) {
        @Override
        public boolean complete(CompleteRequest request) {
          if (failCallerWrites.get()) {
            throw new KeyStoreException("the store is down", null);
          }
          boolean written = delegate.complete(request);
          backgroundWriteApplied.countDown();
          try {
            answer.await();
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            interruptedWrites.incrementAndGet();
            throw new KeyStoreException("interrupted while waiting for the write's answer", e);
          } finally {
            backgroundWriteAnswered.countDown();
          }
          return written;
        }
      };

  IdempotencyGuard guard(Duration closeGrace) {
    return IdempotencyGuard.builder()
        .store(store)
        .clock(clock)
        .completionAttempts(1)
        .closeGracePeriod(closeGrace)
        .listener(event -> events.add(event.type()))
        .build();
  }

  /** Sends {@code key} once; its outcome goes to the background, whose write reaches the store. */
  String sendWithTheOutcomeInTheBackground(IdempotencyGuard guard, String key, AtomicInteger sends)
      throws InterruptedException {
    String result = guard.execute(key, TTL, ctx -> "s" + sends.incrementAndGet());
    failCallerWrites.set(false); // the store is back: the background round writes it
    assertThat(backgroundWriteApplied.await(30, TimeUnit.SECONDS))
        .as("the background write reached the store")
        .isTrue();
    return result;
  }

  /**
   * The write's answer comes once close() gave up on the calls (its grace passed, the write still
   * in the store): the write is not interrupted, its outcome is reported recorded, once, before
   * close() returns, and close() WARNs of nothing.
   */
  @Test
  void aWriteAnsweredAfterTheGraceIsNotInterruptedAndReportedRecordedBeforeCloseReturns()
      throws Exception {
    IdempotencyGuard guard = guard(Duration.ofMillis(200));
    answer =
        () ->
            Poll.within(Duration.ofSeconds(30))
                .until("close() past its grace", () -> guard.settings().gaveUp());
    String key = "close-interrupt:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    String result;
    String closeLog;
    List<Type> whenCloseReturned;
    try {
      result = sendWithTheOutcomeInTheBackground(guard, key, sends);
    } finally {
      closeLog = GuardCloseTest.capturingStandardError(guard::close);
      whenCloseReturned = List.copyOf(events);
    }

    assertThat(interruptedWrites).as("background writes interrupted").hasValue(0);
    assertThat(whenCloseReturned)
        .as("events of a send whose outcome was recorded, when close() returned")
        .doesNotContain(Type.OUTCOME_ABANDONED)
        .containsOnlyOnce(Type.OUTCOME_RECORDED_LATE);
    assertThat(closeLog)
        .as("what close() logged")
        .doesNotContain("still running")
        .doesNotContain("not yet recorded");
    assertThat(result).isEqualTo("s1");
    Optional<StoredRecord> stored = memory.find(Digests.keyId(key), clock.instant());
    assertThat(stored.map(StoredRecord::state)).hasValue(RecordState.COMPLETED);
    try (IdempotencyGuard next = IdempotencyGuard.builder().store(memory).clock(clock).build()) {
      assertThat(next.execute(key, TTL, ctx -> "s" + sends.incrementAndGet())).isEqualTo("s1");
    }
    assertThat(sends).hasValue(1);
  }

  /**
   * The store never answers the write while close() runs: close() returns once its grace and its
   * bound for work on the guard's own threads have passed (here 300 ms, {@link
   * IdempotencyGuard#CLOSE_TIMEOUT} in {@code close()}), without interrupting the write, having
   * abandoned it with one event and one WARN; the answer that comes after it is not reported again.
   */
  @Test
  void aWriteTheStoreDoesNotAnswerIsAbandonedOnceBeforeCloseReturns() throws Exception {
    CountDownLatch storeAnswers = new CountDownLatch(1);
    answer =
        () -> {
          boolean interrupted = false;
          while (true) {
            try {
              if (!storeAnswers.await(30, TimeUnit.SECONDS)) {
                throw new IllegalStateException("the test never let the answer come");
              }
              break;
            } catch (InterruptedException e) {
              interrupted = true; // a store that does not answer does not answer an interrupt
            }
          }
          if (interrupted) {
            throw new InterruptedException("interrupted while the store did not answer");
          }
        };
    IdempotencyGuard guard = guard(Duration.ofMillis(100));
    String key = "close-unanswered:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    String closeLog;
    List<Type> whenCloseReturned;
    long unansweredWhenCloseReturned;
    try {
      sendWithTheOutcomeInTheBackground(guard, key, sends);
    } finally {
      closeLog = GuardCloseTest.capturingStandardError(() -> guard.settings().close(300));
      whenCloseReturned = List.copyOf(events);
      unansweredWhenCloseReturned = backgroundWriteAnswered.getCount();
      storeAnswers.countDown();
    }

    assertThat(unansweredWhenCloseReturned)
        .as("writes the store had not answered when close() returned")
        .isEqualTo(1);
    assertThat(whenCloseReturned)
        .as("events when close() returned")
        .containsOnlyOnce(Type.OUTCOME_ABANDONED)
        .doesNotContain(Type.OUTCOME_RECORDED_LATE);
    assertThat(closeLog)
        .as("what close() logged")
        .containsOnlyOnce("1 sent outcomes not yet recorded")
        .doesNotContain("still running");
    assertThat(backgroundWriteAnswered.await(30, TimeUnit.SECONDS)).isTrue();
    Poll.within(Duration.ofSeconds(30))
        .until(
            "the outcome writer's thread to end after its answer",
            () -> GuardCloseTest.threadsOf(guard).stream().noneMatch(t -> t.contains("outcome")));
    assertThat(interruptedWrites).as("background writes interrupted").hasValue(0);
    assertThat(events)
        .as("events once the late answer came")
        .isEqualTo(whenCloseReturned)
        .containsOnlyOnce(Type.OUTCOME_ABANDONED);
    assertThat(sends).hasValue(1);
  }
}
