package dev.idempotency.spring.suite;

import static dev.idempotency.spring.suite.Stack.PROVIDER;
import static dev.idempotency.spring.suite.Stack.STORE;
import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.params.ParameterizedTest;
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
}
