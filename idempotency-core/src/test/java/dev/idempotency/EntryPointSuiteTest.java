package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.ObservedKeyStore;
import dev.idempotency.testservers.Poll;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * SPEC 16 for the plain-Java entry points: {@code execute}, {@code executeAsync} and batches each
 * meet the same hazards and answer them the same way. Each hazard is one test, run on every entry
 * point:
 *
 * <ul>
 *   <li>the caller's own disappearance while the send runs (an interrupt, a caller that stops
 *       waiting): the send goes on, its outcome is recorded, repeats meanwhile are in progress and
 *       replay afterwards;
 *   <li>{@code close()} mid-send: the send finishes, its outcome is recorded;
 *   <li>a store that is down at the call: nothing sent, a clear error; once it answers, one send;
 *   <li>a lease that lapsed before the send could start: nothing sent on it;
 *   <li>a key that is not safe: refused, naming the problem, the store never asked.
 * </ul>
 *
 * The Spring entry points ({@code @Idempotent}, {@code @IdempotentEndpoint}, {@code
 * IdempotentListener}) have their own tests of these hazards in the starter, on real brokers and
 * over real HTTP.
 */
class EntryPointSuiteTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofMillis(400);

  final ExecutorService pool = Executors.newCachedThreadPool();
  final ObservedKeyStore store = new ObservedKeyStore(InMemoryKeyStore.builder().build());

  @AfterEach
  void stopThreads() throws InterruptedException {
    pool.shutdownNow();
    assertThat(pool.awaitTermination(30, TimeUnit.SECONDS)).isTrue();
  }

  /** What one call through an entry point came to. */
  record Answer(String kind, String value, Throwable failure) {
    static Answer sent(String value) {
      return new Answer("sent", value, null);
    }

    static Answer replayed(String value) {
      return new Answer("replayed", value, null);
    }

    static Answer inProgress() {
      return new Answer("in-progress", null, null);
    }

    static Answer refused(Throwable failure) {
      return new Answer("refused", null, failure);
    }
  }

  /** The provider call of a test: counts sends, and may wait for the test to let it finish. */
  static final class Provider {
    final AtomicInteger sends = new AtomicInteger();
    final CountDownLatch started = new CountDownLatch(1);
    volatile CountDownLatch release = new CountDownLatch(0);

    String send() {
      started.countDown();
      awaitUninterruptibly(release);
      return "n_" + sends.incrementAndGet();
    }
  }

  /** One way into the guard. */
  enum EntryPoint {
    EXECUTE {
      @Override
      Answer call(IdempotencyGuard guard, String key, Provider provider, ExecutorService pool) {
        try {
          Outcome<String> outcome =
              guard.executeForOutcome(
                  IdempotencyRequest.of(key, TTL), ResultCodec.string(), ctx -> provider.send());
          return outcome.replayed()
              ? Answer.replayed(outcome.value())
              : Answer.sent(outcome.value());
        } catch (IdempotencyInProgressException e) {
          return Answer.inProgress();
        } catch (KeyStoreException e) {
          return Answer.refused(e);
        }
      }
    },
    EXECUTE_ASYNC {
      @Override
      Answer call(IdempotencyGuard guard, String key, Provider provider, ExecutorService pool)
          throws InterruptedException {
        CompletableFuture<Outcome<String>> stage =
            guard
                .executeForOutcomeAsync(
                    IdempotencyRequest.of(key, TTL),
                    ResultCodec.string(),
                    ctx -> CompletableFuture.supplyAsync(provider::send, pool))
                .toCompletableFuture();
        try {
          Outcome<String> outcome = stage.get(60, TimeUnit.SECONDS);
          return outcome.replayed()
              ? Answer.replayed(outcome.value())
              : Answer.sent(outcome.value());
        } catch (ExecutionException e) {
          if (e.getCause() instanceof IdempotencyInProgressException) {
            return Answer.inProgress();
          }
          return Answer.refused(e.getCause());
        } catch (java.util.concurrent.TimeoutException e) {
          throw new AssertionError("the async call did not complete", e);
        }
      }
    },
    BATCH {
      @Override
      Answer call(IdempotencyGuard guard, String key, Provider provider, ExecutorService pool) {
        try (Batch<String> batch =
            guard.claimBatch(List.of(IdempotencyRequest.of(key, TTL)), ResultCodec.string())) {
          if (batch.replayed().containsKey(key)) {
            return Answer.replayed(batch.replayed().get(key).value());
          }
          if (batch.inFlight().contains(key)) {
            return Answer.inProgress();
          }
          if (batch.refused().containsKey(key)) {
            return Answer.refused(batch.refused().get(key));
          }
          String value = null;
          for (Batch.Item item : batch.toSend()) {
            value = provider.send();
            batch.succeeded(item, value);
          }
          batch.record();
          if (value == null) {
            return Answer.refused(
                new KeyStoreException(
                    "the batch handed out nothing (lapsed: " + batch.lapsed() + ")", null));
          }
          return Answer.sent(value);
        }
      }
    };

    abstract Answer call(
        IdempotencyGuard guard, String key, Provider provider, ExecutorService pool)
        throws InterruptedException;
  }

  IdempotencyGuard.Builder guard(KeyStore on) {
    return IdempotencyGuard.builder().store(on).lease(LEASE).inFlightWait(Duration.ZERO);
  }

  static String newKey() {
    return "entry:" + UUID.randomUUID();
  }

  @ParameterizedTest
  @EnumSource(EntryPoint.class)
  void aCallerThatStopsWaitingLeavesTheSendToFinishAndItsOutcomeRecorded(EntryPoint entry)
      throws Exception {
    IdempotencyGuard guard = guard(store).build();
    String key = newKey();
    Provider provider = new Provider();
    provider.release = new CountDownLatch(1);
    AtomicReference<Thread> caller = new AtomicReference<>();
    Future<Answer> first =
        pool.submit(
            () -> {
              caller.set(Thread.currentThread());
              return entry.call(guard, key, provider, pool);
            });
    assertThat(provider.started.await(30, TimeUnit.SECONDS)).isTrue();
    caller.get().interrupt(); // the application gives up on its caller

    assertThat(entry.call(guard, key, new Provider(), pool).kind())
        .as("a repeat while the first still sends")
        .isEqualTo("in-progress");
    provider.release.countDown();
    Answer answer;
    try {
      answer = first.get(60, TimeUnit.SECONDS);
    } catch (ExecutionException interruptedWait) {
      answer = null; // an async caller's wait ended by the interrupt: the send goes on
    }
    if (answer != null) {
      assertThat(answer).isEqualTo(Answer.sent("n_1"));
    }

    Provider repeat = new Provider();
    await(() -> replays(entry, guard, key, repeat), "the first send's outcome to be recorded");
    assertThat(provider.sends).hasValue(1);
    assertThat(repeat.sends).hasValue(0);
    guard.close();
  }

  @ParameterizedTest
  @EnumSource(EntryPoint.class)
  void closeMidSendLetsTheSendFinishAndRecordsItsOutcome(EntryPoint entry) throws Exception {
    IdempotencyGuard guard = guard(store).build();
    String key = newKey();
    Provider provider = new Provider();
    provider.release = new CountDownLatch(1);
    Future<Answer> first = pool.submit(() -> entry.call(guard, key, provider, pool));
    assertThat(provider.started.await(30, TimeUnit.SECONDS)).isTrue();

    Future<?> closing = pool.submit(guard::close);
    assertThatThrownBy(() -> closing.get(300, TimeUnit.MILLISECONDS))
        .as("close waits for the running call")
        .isInstanceOf(java.util.concurrent.TimeoutException.class);
    assertThat(first.isDone()).isFalse();
    provider.release.countDown();
    closing.get(60, TimeUnit.SECONDS);

    assertThat(first.get(60, TimeUnit.SECONDS)).isEqualTo(Answer.sent("n_1"));
    try (IdempotencyGuard next = guard(store).build()) {
      Provider repeat = new Provider();
      assertThat(entry.call(next, key, repeat, pool)).isEqualTo(Answer.replayed("n_1"));
      assertThat(repeat.sends).hasValue(0);
    }
  }

  @ParameterizedTest
  @EnumSource(EntryPoint.class)
  void aStoreDownAtTheCallSendsNothingAndOnceItAnswersSendsOnce(EntryPoint entry) throws Exception {
    try (IdempotencyGuard guard = guard(store).build()) {
      String key = newKey();
      Provider provider = new Provider();
      store.failClaims.set(Integer.MAX_VALUE);
      store.failFinds.set(Integer.MAX_VALUE);

      Answer down = entry.call(guard, key, provider, pool);
      assertThat(down.kind()).isEqualTo("refused");
      assertThat(down.failure()).isInstanceOf(KeyStoreException.class);
      assertThat(provider.sends).hasValue(0);

      store.failClaims.set(0);
      store.failFinds.set(0);
      await(
          () -> {
            try {
              return !entry.call(guard, key, provider, pool).kind().equals("refused");
            } catch (InterruptedException e) {
              throw new IllegalStateException(e);
            }
          },
          "the guard to use the store again");
      assertThat(entry.call(guard, key, provider, pool)).isEqualTo(Answer.replayed("n_1"));
      assertThat(provider.sends).hasValue(1);
    }
  }

  @ParameterizedTest
  @EnumSource(EntryPoint.class)
  void aLeaseThatLapsedBeforeTheSendCouldStartIsNeverSentOn(EntryPoint entry) throws Exception {
    KeyStore late = new LeaseRenewalTest.LateAnswers(store, LEASE.multipliedBy(5).dividedBy(4));
    try (IdempotencyGuard guard = guard(late).leaseRenewal(false).build()) {
      Provider provider = new Provider();

      Answer answer = entry.call(guard, newKey(), provider, pool);

      assertThat(answer.kind()).isEqualTo("refused");
      assertThat(provider.sends).hasValue(0);
    }
  }

  @ParameterizedTest
  @EnumSource(EntryPoint.class)
  void aKeyThatIsNotSafeIsRefusedByNameAndTheStoreIsNeverAsked(EntryPoint entry) {
    try (IdempotencyGuard guard = guard(store).build()) {
      Provider provider = new Provider();
      for (String unsafe : List.of("otp:\u0000:user", "otp:" + "x".repeat(2_000), " ")) {
        assertThatThrownBy(() -> entry.call(guard, unsafe, provider, pool))
            .isInstanceOf(IllegalArgumentException.class)
            .hasMessageContaining("key");
      }
      assertThat(provider.sends).hasValue(0);
      assertThat(store.claims).hasValue(0);
    }
  }

  private boolean replays(EntryPoint entry, IdempotencyGuard guard, String key, Provider repeat) {
    try {
      Answer answer = entry.call(guard, key, repeat, pool);
      return answer.kind().equals("replayed") && "n_1".equals(answer.value());
    } catch (InterruptedException e) {
      throw new IllegalStateException(e);
    }
  }

  static void awaitUninterruptibly(CountDownLatch latch) {
    boolean interrupted = false;
    try {
      while (true) {
        try {
          if (latch.await(60, TimeUnit.SECONDS)) {
            return;
          }
          throw new AssertionError("the test never released the send");
        } catch (InterruptedException e) {
          interrupted = true; // a provider call that does not stop for interrupts
        }
      }
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  static void await(BooleanSupplier condition, String what) throws InterruptedException {
    Poll.within(Duration.ofSeconds(30))
        .every(Duration.ofMillis(10))
        .until(what, condition::getAsBoolean);
  }
}
