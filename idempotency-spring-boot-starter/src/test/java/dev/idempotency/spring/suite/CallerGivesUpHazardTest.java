package dev.idempotency.spring.suite;

import static dev.idempotency.spring.suite.Stack.PROVIDER;
import static org.assertj.core.api.Assertions.assertThat;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * SPEC 16, the caller's disappearance while the send runs, on every entry point: the client closes
 * its connection once the provider's send has started (for an async endpoint the container sees the
 * request end; on WebFlux the subscription to the handler's {@code Mono}, or to the {@code Mono} of
 * the guarded method, is cancelled). The send goes on and its outcome is recorded; repeats
 * meanwhile are answered in progress (409), and afterwards replay the one send.
 */
class CallerGivesUpHazardTest extends HazardTest {

  @ParameterizedTest
  @MethodSource("dev.idempotency.spring.suite.HazardTest#entryPoints")
  void aCallerThatDisappearsMidSendLeavesTheSendToFinishAndItsRepeatReplaysIt(EntryPoint entry)
      throws Exception {
    String key = Waits.newKey(entry);
    int port = entry.stack().sharedPort();
    CountDownLatch release = new CountDownLatch(1);
    CountDownLatch started = PROVIDER.hold(release, 1);
    try (AutoCloseable caller = entry.begin(port, key)) {
      assertThat(started.await(Waits.SECONDS, TimeUnit.SECONDS)).as("the send started").isTrue();
    } // the caller disappears

    Answer meanwhile = entry.call(key);
    assertThat(meanwhile.inProgress()).as("a repeat while it sends: " + meanwhile).isTrue();

    release.countDown();
    Waits.await("the send", () -> PROVIDER.sends(key) == 1);
    Answer repeat = Waits.callUntil(() -> entry.call(key), Answer::inProgress);
    assertThat(repeat.status()).as(repeat.toString()).isEqualTo(200);
    assertThat(repeat.body()).contains("sent-" + key + "-1");
    assertThat(PROVIDER.sends(key)).as("one provider send").isEqualTo(1);
  }
}
