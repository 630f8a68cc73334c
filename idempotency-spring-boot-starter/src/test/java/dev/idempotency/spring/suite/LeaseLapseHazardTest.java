package dev.idempotency.spring.suite;

import static dev.idempotency.spring.suite.Stack.PROVIDER;
import static dev.idempotency.spring.suite.Stack.STORE;
import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.IdempotencyKey;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * SPEC 16, a lease that lapses before the send starts, on every entry point. The store makes the
 * first caller's claim, but its answer comes back late (a slow network, a paused process): past the
 * lease, after a second caller took the lapsed key over and sent. The first caller never sends on
 * its lapsed lease (its fenced renewal finds the key taken): it is refused, and the key's one send
 * is the second caller's, which repeats replay.
 *
 * <p>A claim answered late whose key nobody took over meanwhile is renewed, fenced, before the
 * send, and then sends: that is not this hazard (the renewal proved the key still the caller's).
 *
 * <p>On a listener the first caller is a delivery, and the second another consumer of the same
 * listener (an instance elsewhere; here the application's guard called with the listener's key).
 * The delivery whose claim came back late never sends on it: it is not acknowledged, comes back,
 * and is then a replay of the other consumer's send, and acknowledged.
 */
class LeaseLapseHazardTest extends HazardTest {

  @ParameterizedTest
  @MethodSource("dev.idempotency.spring.suite.HazardTest#entryPoints")
  void aLeaseThatLapsedBeforeTheSendCouldStartIsNeverSentOn(EntryPoint entry) throws Exception {
    String key = Waits.newKey(entry);
    int port = entry.stack().sharedPort();
    CountDownLatch answerTheClaim = new CountDownLatch(1);
    int claimsBefore = STORE.claims.get();
    STORE.heldClaimAnswer.set(answerTheClaim);
    CompletableFuture<Answer> first =
        CompletableFuture.supplyAsync(
            () -> {
              try {
                return entry.call(port, key, Duration.ofSeconds(Waits.SECONDS));
              } catch (Exception e) {
                throw new IllegalStateException(e);
              }
            });
    Waits.await("the first claim made", () -> STORE.claims.get() > claimsBefore || first.isDone());
    if (first.isDone()) {
      throw new AssertionError(
          "the first call ended before its claim reached the store: "
              + first.handle((answer, failure) -> answer != null ? answer : failure).join());
    }

    Answer takenOver = Waits.callUntil(() -> entry.call(key), Answer::inProgress);
    assertThat(takenOver.body()).as(takenOver.toString()).contains("sent-" + key + "-1");
    answerTheClaim.countDown();

    Answer lapsed = first.get(Waits.SECONDS, TimeUnit.SECONDS);
    assertThat(lapsed.status()).as("the lapsed caller is refused: " + lapsed).isEqualTo(503);
    assertThat(PROVIDER.sends(key)).as("nothing sent on the lapsed lease").isEqualTo(1);
    Answer repeat = entry.call(key);
    assertThat(repeat.body()).as("a repeat replays the one send").isEqualTo(takenOver.body());
    assertThat(PROVIDER.sends(key)).isEqualTo(1);
  }

  @ParameterizedTest
  @MethodSource("dev.idempotency.spring.suite.HazardTest#listenerEntryPoints")
  void aDeliveryWhoseLeaseLapsedBeforeItsSendNeverSendsOnItAndComesBackAsAReplay(
      ListenerEntryPoint entry) throws Exception {
    ListenerApplication application = entry.shared();
    String key = Waits.newKey(entry);
    CountDownLatch answerTheClaim = new CountDownLatch(1);
    STORE.heldClaimAnswer.set(answerTheClaim);
    try {
      application.publish(key, key);
      // the delivery's claim is made, and its answer held: no other claim may take the latch
      Waits.await("the delivery's claim made", () -> STORE.heldClaimAnswer.get() == null);
      Waits.await(
          "another consumer to take the lapsed key over",
          () -> anotherConsumerSent(application.guard(), entry, key));
    } finally {
      answerTheClaim.countDown();
    }
    assertThat(PROVIDER.sends(key)).as("the other consumer's send").isEqualTo(1);

    Waits.await(
        "the delivery, back, replayed",
        () -> application.events().count(Type.REPLAYED, entry.operation(), key) >= 1);
    application.awaitAcknowledged();
    assertThat(PROVIDER.sends(key)).as("nothing sent on the lapsed lease").isEqualTo(1);
    assertThat(application.deadLettered()).doesNotContain(key);
  }

  /**
   * On a batch listener, the lease of a later message of the batch lapses while an earlier one's
   * send runs (the store refuses the renewals meanwhile), and another consumer takes that key over
   * and sends. The batch never sends that message on its lapsed lease, though it was claimed with
   * the batch: it comes back, and is then a replay. The earlier message's send is recorded: one
   * send per key, everything acknowledged, nothing dead-lettered.
   */
  @ParameterizedTest
  @EnumSource(value = ListenerEntryPoint.class, names = "KAFKA_BATCH")
  void aLaterMessageOfABatchWhoseLeaseLapsedMidBatchIsNeverSentOnIt(ListenerEntryPoint entry)
      throws Exception {
    KafkaListenerApplication application = (KafkaListenerApplication) entry.shared();
    String first = Waits.newKey(entry);
    String second = Waits.newKey(entry);
    CountDownLatch release = new CountDownLatch(1);
    CountDownLatch started = PROVIDER.holdNext(release);
    try {
      application.publishInOneBatch(first, second);
      assertThat(started.await(Waits.SECONDS, TimeUnit.SECONDS)).as("the first send").isTrue();
      STORE.renewalsDown.set(true);
      Waits.await(
          "another consumer to take the second key over",
          () -> anotherConsumerSent(application.guard(), entry, second));
      STORE.renewalsDown.set(false);
    } finally {
      release.countDown();
    }

    application.awaitAcknowledged();
    assertThat(PROVIDER.sends(second)).as("nothing sent on the lapsed lease").isEqualTo(1);
    assertThat(PROVIDER.sends(first)).as("the first message's one send").isEqualTo(1);
    assertThat(application.events().count(Type.REPLAYED, entry.operation(), second))
        .as("the second message, back, replayed")
        .isGreaterThanOrEqualTo(1);
    assertThat(application.events().count(Type.COMPLETED, entry.operation(), first))
        .as("the first message's send recorded")
        .isEqualTo(1);
    assertThat(application.deadLettered()).doesNotContain(first, second);
  }

  /**
   * Sends {@code key} as another consumer of {@code entry}'s listener would: whether it took the
   * delivery's lapsed claim over (attempt 2) and sent; false while the key is in flight.
   *
   * @throws AssertionError if the key was answered as sent before (the delivery sent on its claim),
   *     or claimed at another attempt
   */
  private static boolean anotherConsumerSent(
      IdempotencyGuard guard, ListenerEntryPoint entry, String key) {
    AtomicInteger attempt = new AtomicInteger();
    try {
      guard.execute(
          IdempotencyKey.of(entry.operation(), key),
          Duration.ofHours(1),
          context -> {
            attempt.set(context.attempt());
            PROVIDER.send(key);
            return null; // what the listener, a void method, records
          });
    } catch (IdempotencyInProgressException inFlight) {
      return false;
    }
    if (attempt.get() != 2) {
      throw new AssertionError(
          attempt.get() == 0
              ? "a replay, not a takeover: the delivery sent on its late claim"
              : "attempt " + attempt.get() + ", not the takeover of the delivery's claim");
    }
    return true;
  }
}
