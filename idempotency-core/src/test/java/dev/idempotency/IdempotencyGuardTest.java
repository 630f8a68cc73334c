package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.tck.MutableClock;
import dev.idempotency.tck.ObservedKeyStore;
import dev.idempotency.testservers.Poll;
import java.io.IOException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;

class IdempotencyGuardTest {

  static final Duration TTL = Duration.ofHours(24);
  static final Duration LEASE = Duration.ofSeconds(30);

  final MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final ObservedKeyStore store = new ObservedKeyStore(InMemoryKeyStore.builder().build());
  final List<IdempotencyEvent> events = new CopyOnWriteArrayList<>();
  final AtomicInteger sends = new AtomicInteger();
  final ExecutorService pool = Executors.newCachedThreadPool();

  IdempotencyGuard.Builder guardBuilder() {
    return IdempotencyGuard.builder().store(store).clock(clock).lease(LEASE).listener(events::add);
  }

  final IdempotencyGuard guard = guardBuilder().build();

  @AfterEach
  void stopThreads() throws InterruptedException {
    pool.shutdownNow();
    assertThat(pool.awaitTermination(30, TimeUnit.SECONDS)).isTrue();
  }

  static String newKey() {
    return "otp:user_42:" + UUID.randomUUID();
  }

  Sender<String> countingSender(String result) {
    return ctx -> {
      sends.incrementAndGet();
      return result;
    };
  }

  List<Type> eventTypes() {
    return events.stream().map(IdempotencyEvent::type).toList();
  }

  static void await(BooleanSupplier condition, String what) throws InterruptedException {
    Poll.within(Duration.ofSeconds(30))
        .every(Duration.ofMillis(5))
        .until(what, condition::getAsBoolean);
  }

  @Nested
  class ClaimAndReplay {

    @Test
    void repeatInsideTheWindowReturnsTheStoredResultWithoutSending() {
      String key = newKey();

      String first = guard.execute(key, TTL, countingSender("n_801"));
      String second = guard.execute(key, TTL, countingSender("n_802"));

      assertThat(first).isEqualTo("n_801");
      assertThat(second).isEqualTo("n_801");
      assertThat(sends).hasValue(1);
      assertThat(eventTypes()).containsExactly(Type.CLAIMED, Type.COMPLETED, Type.REPLAYED);
    }

    @Test
    void outcomeTellsAReplayFromAFirstSend() {
      IdempotencyRequest request = IdempotencyRequest.of(newKey(), TTL);

      Outcome<String> first =
          guard.executeForOutcome(request, ResultCodec.string(), countingSender("n_1"));
      Outcome<String> second =
          guard.executeForOutcome(request, ResultCodec.string(), countingSender("n_2"));

      assertThat(first).isEqualTo(new Outcome<>("n_1", false, 1, true));
      assertThat(second).isEqualTo(new Outcome<>("n_1", true, 1, true));
    }

    @Test
    void repeatAfterTheWindowSendsAgain() {
      String key = newKey();
      guard.execute(key, TTL, countingSender("old"));

      clock.advance(TTL);
      String again = guard.execute(key, TTL, countingSender("new"));

      assertThat(again).isEqualTo("new");
      assertThat(sends).hasValue(2);
    }

    @Test
    void windowIsNotExtendedByReplays() {
      String key = newKey();
      guard.execute(key, TTL, countingSender("first"));
      clock.advance(TTL.minusMinutes(1));
      assertThat(guard.execute(key, TTL, countingSender("x"))).isEqualTo("first");

      clock.advance(Duration.ofMinutes(1));

      assertThat(guard.execute(key, TTL, countingSender("second"))).isEqualTo("second");
      assertThat(sends).hasValue(2);
    }

    @Test
    void completedRecordIsReplayedLongAfterItsLease() {
      String key = newKey();
      guard.execute(key, TTL, countingSender("n_1"));

      clock.advance(LEASE.multipliedBy(10));

      assertThat(guard.execute(key, TTL, countingSender("n_2"))).isEqualTo("n_1");
      assertThat(sends).hasValue(1);
    }

    @Test
    void nullResultIsStoredAndReplayedAsNull() {
      String key = newKey();

      assertThat(guard.execute(key, TTL, countingSender(null))).isNull();
      Outcome<String> replay =
          guard.executeForOutcome(
              IdempotencyRequest.of(key, TTL), ResultCodec.string(), countingSender("x"));

      assertThat(replay.value()).isNull();
      assertThat(replay.replayed()).isTrue();
      assertThat(sends).hasValue(1);
    }

    @Test
    void explicitCodecRoundTripsOtherTypes() {
      String key = newKey();
      ResultCodec<Integer> ints = ResultCodec.ofText(String::valueOf, Integer::valueOf);

      int first = guard.execute(key, TTL, ints, ctx -> 801);
      int second = guard.execute(key, TTL, ints, ctx -> 999);

      assertThat(first).isEqualTo(801);
      assertThat(second).isEqualTo(801);
    }

    @Test
    void thirtyTwoThreadsWithOneKeyGetOneSendAndTheSameResult() throws Exception {
      IdempotencyGuard waiting = guardBuilder().inFlightWait(Duration.ofSeconds(60)).build();
      String key = newKey();
      int threads = 32;
      CountDownLatch allStarted = new CountDownLatch(threads);
      List<Future<String>> results = new ArrayList<>();
      for (int i = 0; i < threads; i++) {
        results.add(
            pool.submit(
                () -> {
                  allStarted.countDown();
                  return waiting.execute(
                      key,
                      TTL,
                      ctx -> {
                        int n = sends.incrementAndGet();
                        allStarted.await(30, TimeUnit.SECONDS);
                        return "n_" + n;
                      });
                }));
      }

      List<String> values = new ArrayList<>();
      for (Future<String> result : results) {
        values.add(result.get(60, TimeUnit.SECONDS));
      }

      assertThat(sends).hasValue(1);
      assertThat(values).hasSize(threads).containsOnly("n_1");
    }

    @Test
    void senderSeesStableProviderKeysAndTheFirstAttempt() {
      String key = "otp:user_42:challenge_9f3a";
      List<SendContext> contexts = new ArrayList<>();

      guard.execute(
          key,
          TTL,
          ctx -> {
            contexts.add(ctx);
            return "n_801";
          });

      SendContext context = contexts.get(0);
      assertThat(context.key()).isEqualTo(key);
      assertThat(context.attempt()).isEqualTo(1);
      assertThat(context.isTakeover()).isFalse();
      assertThat(context.providerKey())
          .isEqualTo(IdempotencyKey.providerKey(key))
          .matches("[A-Za-z0-9_-]{1,64}");
      assertThat(context.providerUuid().version()).isEqualTo(5);
      assertThat(context.providerUuid().variant()).isEqualTo(2);
      assertThat(context.toString()).doesNotContain(key);
    }
  }

  @Nested
  class Fingerprints {

    @Test
    void sameFingerprintReplays() {
      IdempotencyRequest request = IdempotencyRequest.of(newKey(), TTL).withFingerprint("body-1");

      guard.executeForOutcome(request, ResultCodec.string(), countingSender("n_1"));
      Outcome<String> replay =
          guard.executeForOutcome(request, ResultCodec.string(), countingSender("n_2"));

      assertThat(replay.value()).isEqualTo("n_1");
      assertThat(sends).hasValue(1);
    }

    @Test
    void differentFingerprintIsKeyReuseAndSendsNothing() {
      String key = newKey();
      guard.executeForOutcome(
          IdempotencyRequest.of(key, TTL).withFingerprint("body-1"),
          ResultCodec.string(),
          countingSender("n_1"));

      assertThatThrownBy(
              () ->
                  guard.executeForOutcome(
                      IdempotencyRequest.of(key, TTL).withFingerprint("body-2"),
                      ResultCodec.string(),
                      countingSender("n_2")))
          .isInstanceOf(IdempotencyKeyReuseException.class)
          .hasMessageContaining("different request fingerprint")
          .hasMessageNotContaining(key);
      assertThat(sends).hasValue(1);
      assertThat(eventTypes()).contains(Type.KEY_REUSE);
    }

    @Test
    void differentFingerprintWhileInFlightIsKeyReuse() throws Exception {
      String key = newKey();
      CountDownLatch release = new CountDownLatch(1);
      Future<String> first =
          pool.submit(
              () ->
                  guard
                      .executeForOutcome(
                          IdempotencyRequest.of(key, TTL).withFingerprint("a"),
                          ResultCodec.string(),
                          ctx -> {
                            sends.incrementAndGet();
                            release.await();
                            return "n_1";
                          })
                      .value());
      await(() -> sends.get() == 1, "first send to start");

      assertThatThrownBy(
              () ->
                  guard.executeForOutcome(
                      IdempotencyRequest.of(key, TTL).withFingerprint("b"),
                      ResultCodec.string(),
                      countingSender("n_2")))
          .isInstanceOf(IdempotencyKeyReuseException.class);
      release.countDown();
      assertThat(first.get(30, TimeUnit.SECONDS)).isEqualTo("n_1");
      assertThat(sends).hasValue(1);
    }

    @Test
    void noFingerprintAndAFingerprintAreDifferentRequests() {
      String key = newKey();
      guard.execute(key, TTL, countingSender("n_1"));

      assertThatThrownBy(
              () ->
                  guard.executeForOutcome(
                      IdempotencyRequest.of(key, TTL).withFingerprint("x"),
                      ResultCodec.string(),
                      countingSender("n_2")))
          .isInstanceOf(IdempotencyKeyReuseException.class);
    }
  }

  @Nested
  class InFlight {

    @Test
    void repeatGivesUpAfterInFlightWaitWithoutSending() throws Exception {
      IdempotencyGuard impatient = guardBuilder().inFlightWait(Duration.ofMillis(50)).build();
      String key = newKey();
      CountDownLatch release = new CountDownLatch(1);
      Future<String> first =
          pool.submit(
              () ->
                  impatient.execute(
                      key,
                      TTL,
                      ctx -> {
                        sends.incrementAndGet();
                        release.await();
                        return "n_1";
                      }));
      await(() -> sends.get() == 1, "first send to start");

      IdempotencyInProgressException conflict =
          (IdempotencyInProgressException)
              catchThrowable(() -> impatient.execute(key, TTL, countingSender("n_2")));

      assertThat(conflict).isNotNull();
      assertThat(conflict.waited()).isGreaterThanOrEqualTo(Duration.ofMillis(50));
      assertThat(conflict.getMessage()).doesNotContain(key);
      release.countDown();
      assertThat(first.get(30, TimeUnit.SECONDS)).isEqualTo("n_1");
      assertThat(sends).hasValue(1);
      assertThat(eventTypes()).contains(Type.IN_PROGRESS_CONFLICT);
    }

    @Test
    void zeroInFlightWaitFailsAtOnce() throws Exception {
      IdempotencyGuard noWait = guardBuilder().inFlightWait(Duration.ZERO).build();
      String key = newKey();
      CountDownLatch release = new CountDownLatch(1);
      Future<String> first =
          pool.submit(
              () ->
                  noWait.execute(
                      key,
                      TTL,
                      ctx -> {
                        sends.incrementAndGet();
                        release.await();
                        return "n_1";
                      }));
      await(() -> sends.get() == 1, "first send to start");

      assertThatThrownBy(() -> noWait.execute(key, TTL, countingSender("n_2")))
          .isInstanceOf(IdempotencyInProgressException.class);
      release.countDown();
      first.get(30, TimeUnit.SECONDS);
    }

    @Test
    void repeatDuringASlowFirstCallWaitsAndReplays() throws Exception {
      IdempotencyGuard patient = guardBuilder().inFlightWait(Duration.ofSeconds(60)).build();
      String key = newKey();
      CountDownLatch release = new CountDownLatch(1);
      Future<String> first =
          pool.submit(
              () ->
                  patient.execute(
                      key,
                      TTL,
                      ctx -> {
                        sends.incrementAndGet();
                        release.await();
                        return "n_801";
                      }));
      await(() -> sends.get() == 1, "first send to start");
      Future<Outcome<String>> repeat =
          pool.submit(
              () ->
                  patient.executeForOutcome(
                      IdempotencyRequest.of(key, TTL), ResultCodec.string(), countingSender("x")));
      await(() -> store.inFlightSeen.get() >= 1, "the repeat to find the first call in flight");

      release.countDown();

      Outcome<String> replay = repeat.get(30, TimeUnit.SECONDS);
      assertThat(replay.value()).isEqualTo("n_801");
      assertThat(replay.replayed()).isTrue();
      assertThat(first.get(30, TimeUnit.SECONDS)).isEqualTo("n_801");
      assertThat(sends).hasValue(1);
      assertThat(eventTypes()).contains(Type.WAITED);
    }

    @Test
    void waitingRepeatClaimsTheKeyWhenTheFirstCallFails() throws Exception {
      IdempotencyGuard patient = guardBuilder().inFlightWait(Duration.ofSeconds(60)).build();
      String key = newKey();
      CountDownLatch release = new CountDownLatch(1);
      Future<String> first =
          pool.submit(
              () ->
                  patient.execute(
                      key,
                      TTL,
                      ctx -> {
                        sends.incrementAndGet();
                        release.await();
                        throw new IllegalStateException("provider down");
                      }));
      await(() -> sends.get() == 1, "first send to start");
      Future<String> repeat = pool.submit(() -> patient.execute(key, TTL, countingSender("n_2")));
      await(() -> store.inFlightSeen.get() >= 1, "the repeat to find the first call in flight");

      release.countDown();

      assertThat(repeat.get(30, TimeUnit.SECONDS)).isEqualTo("n_2");
      assertThatThrownBy(() -> first.get(30, TimeUnit.SECONDS))
          .hasCauseInstanceOf(IllegalStateException.class);
      assertThat(sends).hasValue(2);
    }

    @Test
    void interruptedWaitStopsWithInProgressAndKeepsTheInterrupt() throws Exception {
      IdempotencyGuard patient = guardBuilder().inFlightWait(Duration.ofSeconds(60)).build();
      String key = newKey();
      CountDownLatch release = new CountDownLatch(1);
      pool.submit(
          () ->
              patient.execute(
                  key,
                  TTL,
                  ctx -> {
                    sends.incrementAndGet();
                    release.await();
                    return "n_1";
                  }));
      await(() -> sends.get() == 1, "first send to start");
      CompletableFuture<Boolean> interruptKept = new CompletableFuture<>();
      Thread waiter =
          new Thread(
              () -> {
                try {
                  patient.execute(key, TTL, countingSender("x"));
                  interruptKept.complete(false);
                } catch (IdempotencyInProgressException e) {
                  interruptKept.complete(Thread.currentThread().isInterrupted());
                }
              });
      waiter.start();
      await(() -> store.inFlightSeen.get() >= 1, "the waiter to wait");

      waiter.interrupt();

      assertThat(interruptKept.get(30, TimeUnit.SECONDS)).isTrue();
      release.countDown();
      assertThat(sends).hasValue(1);
    }
  }

  @Nested
  class Leases {

    /** Claims the key the way a process that then crashed would have. */
    String crashedClaim(String key) {
      ClaimResult result =
          store.claim(
              new ClaimRequest(
                  IdempotencyKey.digest(key),
                  "crashed-owner",
                  "",
                  clock.instant(),
                  LEASE,
                  TTL,
                  true,
                  null));
      assertThat(result).isInstanceOf(ClaimResult.Claimed.class);
      return key;
    }

    @Test
    void expiredLeaseIsTakenOverWithTheSameProviderKey() {
      String key = crashedClaim(newKey());
      clock.advance(LEASE);
      List<SendContext> contexts = new ArrayList<>();

      Outcome<String> outcome =
          guard.executeForOutcome(
              IdempotencyRequest.of(key, TTL),
              ResultCodec.string(),
              ctx -> {
                contexts.add(ctx);
                return "n_2";
              });

      assertThat(outcome.attempt()).isEqualTo(2);
      assertThat(contexts.get(0).attempt()).isEqualTo(2);
      assertThat(contexts.get(0).isTakeover()).isTrue();
      assertThat(contexts.get(0).providerKey()).isEqualTo(IdempotencyKey.providerKey(key));
      assertThat(eventTypes()).contains(Type.TAKEOVER);
    }

    @Test
    void leaseStillValidIsNotTakenOver() {
      IdempotencyGuard noWait = guardBuilder().inFlightWait(Duration.ZERO).build();
      String key = crashedClaim(newKey());
      clock.advance(LEASE.minusMillis(1));

      assertThatThrownBy(() -> noWait.execute(key, TTL, countingSender("x")))
          .isInstanceOf(IdempotencyInProgressException.class);
      assertThat(sends).hasValue(0);
    }

    @Test
    void strictModeRefusesAnExpiredLeaseAsOutcomeUnknown() {
      IdempotencyGuard strict = guardBuilder().takeoverPolicy(TakeoverPolicy.REFUSE).build();
      String key = crashedClaim(newKey());
      clock.advance(LEASE.plusSeconds(1));

      IdempotencyOutcomeUnknownException unknown =
          (IdempotencyOutcomeUnknownException)
              catchThrowable(() -> strict.execute(key, TTL, countingSender("x")));

      assertThat(unknown).isNotNull();
      assertThat(unknown.attempt()).isEqualTo(1);
      assertThat(sends).hasValue(0);
      assertThat(eventTypes()).contains(Type.OUTCOME_UNKNOWN);
    }

    @Test
    void senderThatOutlivesItsLeaseIsTakenOverAndCannotOverwriteTheWinner() throws Exception {
      IdempotencyGuard guard = guardBuilder().leaseRenewal(false).build();
      String key = newKey();
      CountDownLatch takenOver = new CountDownLatch(1);
      Future<Outcome<String>> slow =
          pool.submit(
              () ->
                  guard.executeForOutcome(
                      IdempotencyRequest.of(key, TTL),
                      ResultCodec.string(),
                      ctx -> {
                        sends.incrementAndGet();
                        clock.advance(LEASE.plusSeconds(1));
                        takenOver.await();
                        return "late";
                      }));
      await(() -> sends.get() == 1, "slow send to start");

      Outcome<String> winner =
          guard.executeForOutcome(
              IdempotencyRequest.of(key, TTL), ResultCodec.string(), countingSender("winner"));
      takenOver.countDown();
      Outcome<String> late = slow.get(30, TimeUnit.SECONDS);

      assertThat(winner.attempt()).isEqualTo(2);
      assertThat(late.value()).isEqualTo("late");
      assertThat(late.recorded()).isFalse();
      assertThat(guard.execute(key, TTL, countingSender("x"))).isEqualTo("winner");
      assertThat(sends).hasValue(2);
      assertThat(eventTypes())
          .contains(Type.TAKEOVER, Type.LEASE_OVERRUN, Type.OUTCOME_NOT_RECORDED);
    }
  }

  @Nested
  class SenderFailures {

    @Test
    void uncheckedExceptionIsRethrownAsItIsAndFreesTheKey() {
      String key = newKey();
      IllegalStateException boom = new IllegalStateException("provider down");

      Throwable thrown =
          catchThrowable(
              () ->
                  guard.execute(
                      key,
                      TTL,
                      ctx -> {
                        sends.incrementAndGet();
                        throw boom;
                      }));

      assertThat(thrown).isSameAs(boom);
      assertThat(guard.execute(key, TTL, countingSender("n_2"))).isEqualTo("n_2");
      assertThat(sends).hasValue(2);
      assertThat(eventTypes()).contains(Type.RELEASED);
    }

    @Test
    void checkedExceptionArrivesAsTheCauseOfSendFailed() {
      String key = newKey();
      IOException io = new IOException("connection reset");

      Throwable thrown =
          catchThrowable(
              () ->
                  guard.execute(
                      key,
                      TTL,
                      ctx -> {
                        throw io;
                      }));

      assertThat(thrown).isInstanceOf(SendFailedException.class).hasCause(io);
      assertThat(thrown.getMessage()).doesNotContain(key);
      assertThat(guard.execute(key, TTL, countingSender("n_2"))).isEqualTo("n_2");
    }

    @Test
    void errorIsRethrownAsItIs() {
      String key = newKey();
      StackOverflowError error = new StackOverflowError("deep");

      assertThat(
              catchThrowable(
                  () ->
                      guard.execute(
                          key,
                          TTL,
                          ctx -> {
                            throw error;
                          })))
          .isSameAs(error);
      assertThat(guard.execute(key, TTL, countingSender("n_2"))).isEqualTo("n_2");
    }

    @Test
    void permanentFailureIsStoredAndReplayedWithoutSending() {
      IdempotencyGuard classifying =
          guardBuilder()
              .failureClassifier(failure -> failure instanceof IllegalArgumentException)
              .build();
      String key = newKey();
      IllegalArgumentException invalid = new IllegalArgumentException("invalid phone number");

      Throwable first =
          catchThrowable(
              () ->
                  classifying.execute(
                      key,
                      TTL,
                      ctx -> {
                        sends.incrementAndGet();
                        throw invalid;
                      }));
      IdempotencyStoredFailureException repeat =
          (IdempotencyStoredFailureException)
              catchThrowable(() -> classifying.execute(key, TTL, countingSender("x")));

      assertThat(first).isSameAs(invalid);
      assertThat(repeat).isNotNull();
      assertThat(repeat.failureType()).isEqualTo(IllegalArgumentException.class.getName());
      assertThat(repeat.failureMessage()).isEqualTo("invalid phone number");
      assertThat(sends).hasValue(1);
      assertThat(eventTypes()).contains(Type.FAILURE_STORED, Type.FAILURE_REPLAYED);
    }

    @Test
    void permanentFailureIsKeptOnlyForTheWindow() {
      IdempotencyGuard classifying = guardBuilder().failureClassifier(failure -> true).build();
      String key = newKey();
      catchThrowable(
          () ->
              classifying.execute(
                  key,
                  TTL,
                  ctx -> {
                    throw new IllegalStateException("no");
                  }));

      clock.advance(TTL);

      assertThat(classifying.execute(key, TTL, countingSender("n_2"))).isEqualTo("n_2");
    }

    @Test
    void classifierThatThrowsCountsAsTransient() {
      IdempotencyGuard broken =
          guardBuilder()
              .failureClassifier(
                  failure -> {
                    throw new IllegalStateException("classifier bug");
                  })
              .build();
      String key = newKey();
      catchThrowable(
          () ->
              broken.execute(
                  key,
                  TTL,
                  ctx -> {
                    throw new IllegalStateException("send failed");
                  }));

      assertThat(broken.execute(key, TTL, countingSender("n_2"))).isEqualTo("n_2");
    }

    @Test
    void releaseFailureIsAddedAsSuppressedAndTheSendersExceptionStillArrives() {
      String key = newKey();
      store.failReleases.set(1);
      IllegalStateException boom = new IllegalStateException("provider down");

      Throwable thrown =
          catchThrowable(
              () ->
                  guard.execute(
                      key,
                      TTL,
                      ctx -> {
                        throw boom;
                      }));

      assertThat(thrown).isSameAs(boom);
      assertThat(boom.getSuppressed()).singleElement().isInstanceOf(KeyStoreException.class);
    }
  }

  @Nested
  class RecordingFailures {

    @Test
    void completionIsRetriedAndSucceeds() {
      String key = newKey();
      store.failCompletes.set(2);

      Outcome<String> outcome =
          guard.executeForOutcome(
              IdempotencyRequest.of(key, TTL), ResultCodec.string(), countingSender("n_1"));

      assertThat(outcome.recorded()).isTrue();
      assertThat(store.completes).hasValue(3);
      assertThat(guard.execute(key, TTL, countingSender("n_2"))).isEqualTo("n_1");
      assertThat(sends).hasValue(1);
    }

    @Test
    void completionThatKeepsFailingStillReturnsTheResultAndReportsIt() {
      String key = newKey();
      store.failCompletes.set(100);

      Outcome<String> outcome =
          guard.executeForOutcome(
              IdempotencyRequest.of(key, TTL), ResultCodec.string(), countingSender("n_1"));

      assertThat(outcome.value()).isEqualTo("n_1");
      assertThat(outcome.recorded()).isFalse();
      // the call's own attempts; then the guard goes on in the background
      // (BackgroundOutcomeWriteTest)
      assertThat(store.completes.get())
          .isGreaterThanOrEqualTo(IdempotencyGuard.DEFAULT_COMPLETION_ATTEMPTS);
      assertThat(eventTypes()).contains(Type.OUTCOME_NOT_RECORDED);
      IdempotencyEvent notRecorded =
          events.stream().filter(e -> e.type() == Type.OUTCOME_NOT_RECORDED).findFirst().get();
      assertThat(notRecorded.error()).isInstanceOf(KeyStoreException.class);
    }

    @Test
    void resultThatCannotBeEncodedIsRecordedAsSentAndNeverResent() {
      String key = newKey();
      ResultCodec<String> broken =
          ResultCodec.ofText(
              value -> {
                throw new IllegalStateException("cannot encode");
              },
              text -> text);

      String first = guard.execute(key, TTL, broken, countingSender("n_1"));
      Throwable repeat =
          catchThrowable(() -> guard.execute(key, TTL, broken, countingSender("n_2")));

      assertThat(first).isEqualTo("n_1");
      assertThat(repeat)
          .isInstanceOf(IdempotencyResultUnavailableException.class)
          .hasMessageContaining("could not be encoded");
      assertThat(sends).hasValue(1);
      assertThat(eventTypes()).contains(Type.RESULT_NOT_STORED);
    }

    @Test
    void otherResultTypesNameTheirCodecAndReplayTyped() {
      String key = newKey();
      ResultCodec<Integer> ints = ResultCodec.ofText(String::valueOf, Integer::valueOf);

      Integer first =
          guard.execute(
              key,
              TTL,
              ints,
              ctx -> {
                sends.incrementAndGet();
                return 42;
              });
      Integer repeat = guard.execute(key, TTL, ints, ctx -> 43);

      assertThat(first).isEqualTo(42);
      assertThat(repeat).isEqualTo(42);
      assertThat(sends).hasValue(1);
    }

    @Test
    void resultLargerThanTheStoreLimitIsRecordedAsSentWithoutAResult() {
      ObservedKeyStore small =
          new ObservedKeyStore(InMemoryKeyStore.builder().maxPayloadBytes(100).build());
      IdempotencyGuard guardOnSmall = IdempotencyGuard.builder().store(small).clock(clock).build();
      String key = newKey();
      String big = "x".repeat(100);

      assertThat(guardOnSmall.execute(key, TTL, countingSender(big))).isEqualTo(big);
      assertThatThrownBy(() -> guardOnSmall.execute(key, TTL, countingSender("again")))
          .isInstanceOf(IdempotencyResultUnavailableException.class)
          .hasMessageContaining("exceeds the store's limit of 100");
      assertThat(sends).hasValue(1);
    }

    @Test
    void storedResultThatCannotBeDecodedIsAClearErrorAndNeverASend() {
      String key = newKey();
      guard.execute(key, TTL, countingSender("not a number"));
      ResultCodec<Integer> ints = ResultCodec.ofText(String::valueOf, Integer::valueOf);

      assertThatThrownBy(() -> guard.execute(key, TTL, ints, ctx -> 1))
          .isInstanceOf(IdempotencyResultUnavailableException.class)
          .hasMessageContaining("could not be decoded")
          .hasCauseInstanceOf(NumberFormatException.class);
      assertThat(sends).hasValue(1);
    }
  }

  @Nested
  class StoreFailures {

    @Test
    void storeFailureBeforeTheClaimFailsClosedAndSendsNothing() {
      store.failClaims.set(1);

      assertThatThrownBy(() -> guard.execute(newKey(), TTL, countingSender("n_1")))
          .isInstanceOf(KeyStoreException.class);
      assertThat(sends).hasValue(0);
      assertThat(eventTypes()).containsExactly(Type.STORE_ERROR);
    }

    @Test
    void unexpectedRuntimeExceptionFromAStoreBecomesKeyStoreException() {
      IdempotencyGuard onBrokenStore =
          IdempotencyGuard.builder()
              .store(
                  new dev.idempotency.spi.KeyStore() {
                    @Override
                    public ClaimResult claim(ClaimRequest request) {
                      throw new IllegalStateException("driver bug");
                    }

                    @Override
                    public boolean complete(dev.idempotency.spi.CompleteRequest request) {
                      throw new AssertionError("never reached");
                    }

                    @Override
                    public boolean release(String keyId, String ownerToken) {
                      throw new AssertionError("never reached");
                    }

                    @Override
                    public boolean extend(dev.idempotency.spi.ExtendRequest request) {
                      throw new AssertionError("never reached");
                    }
                  })
              .build();

      assertThatThrownBy(() -> onBrokenStore.execute(newKey(), TTL, countingSender("n_1")))
          .isInstanceOf(KeyStoreException.class)
          .hasCauseInstanceOf(IllegalStateException.class);
      assertThat(sends).hasValue(0);
    }

    @Test
    void failOpenSendsAndReportsIt() {
      IdempotencyGuard failOpen = guardBuilder().failOpen(true).build();
      store.failClaims.set(1);

      Outcome<String> outcome =
          failOpen.executeForOutcome(
              IdempotencyRequest.of(newKey(), TTL), ResultCodec.string(), countingSender("n_1"));

      assertThat(outcome.value()).isEqualTo("n_1");
      assertThat(outcome.recorded()).isFalse();
      assertThat(sends).hasValue(1);
      assertThat(eventTypes()).containsExactly(Type.STORE_ERROR, Type.FAIL_OPEN_SEND);
    }

    @Test
    void failOpenCanBeChosenPerOperation() {
      IdempotencyGuard guard =
          guardBuilder().failOpen(false).failOpen("marketing", true).failOpen("otp", false).build();
      store.failClaims.set(2);

      Outcome<String> marketing =
          guard.executeForOutcome(
              IdempotencyRequest.of(newKey(), TTL).withOperation("marketing"),
              ResultCodec.string(),
              countingSender("n_1"));
      Throwable otp =
          catchThrowable(
              () ->
                  guard.executeForOutcome(
                      IdempotencyRequest.of(newKey(), TTL).withOperation("otp"),
                      ResultCodec.string(),
                      countingSender("n_2")));

      assertThat(marketing.value()).isEqualTo("n_1");
      assertThat(marketing.recorded()).isFalse();
      assertThat(otp).isInstanceOf(KeyStoreException.class);
      assertThat(sends).hasValue(1);
      assertThatThrownBy(() -> guardBuilder().failOpen("not an operation!", true))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("operation must be");
    }

    /**
     * After one failure calls are refused at once until the guard's probe sees the store answer
     * (StoreOutageTest); then the same guard works again, without a restart.
     */
    @Test
    void sameGuardWorksAgainOnceTheStoreRecovers() throws InterruptedException {
      String key = newKey();
      store.failClaims.set(1);
      catchThrowable(() -> guard.execute(key, TTL, countingSender("n_1")));

      await(
          () -> {
            try {
              return guard.execute(key, TTL, countingSender("n_1")).equals("n_1");
            } catch (KeyStoreException refusedWhileProbing) {
              return false;
            }
          },
          "the guard to call the store again");
      assertThat(guard.execute(key, TTL, countingSender("n_2"))).isEqualTo("n_1");
      assertThat(sends).hasValue(1);
    }
  }

  @Nested
  class Observability {

    @Test
    void listenerThatThrowsDoesNotBreakTheCall() {
      IdempotencyGuard withBadListener =
          guardBuilder()
              .listener(
                  event -> {
                    throw new IllegalStateException("metrics down");
                  })
              .build();

      assertThat(withBadListener.execute(newKey(), TTL, countingSender("n_1"))).isEqualTo("n_1");
    }

    @Test
    void eventsNameTheKeyOnlyByItsDigest() {
      String key = newKey();
      guard.execute(key, TTL, countingSender("n_1"));
      guard.execute(key, TTL, countingSender("n_1"));

      assertThat(events).isNotEmpty();
      assertThat(events)
          .allSatisfy(e -> assertThat(e.keyDigest()).isEqualTo(IdempotencyKey.digest(key)));
      assertThat(events.get(1).duration()).isGreaterThanOrEqualTo(Duration.ZERO);
    }

    @Test
    void storesSeeOnlyADigestUnlessRawKeysAreAskedFor() {
      String key = newKey();
      guard.execute(key, TTL, countingSender("n_1"));
      guardBuilder().storeRawKeys(true).build().execute(key + ":raw", TTL, countingSender("n_2"));

      ClaimRequest digestOnly = store.claimRequests.get(0);
      ClaimRequest raw = store.claimRequests.get(1);
      assertThat(digestOnly.keyId())
          .isEqualTo(IdempotencyKey.digest(key))
          .doesNotContain("user_42");
      assertThat(digestOnly.debugKey()).isNull();
      assertThat(raw.debugKey()).isEqualTo(key + ":raw");
    }
  }
}
