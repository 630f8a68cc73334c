package dev.idempotency.spring.suite;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Probe (probeT) of the starter's shutdown phase ({@code GuardShutdown}, {@code DEFAULT_PHASE -
 * 4096}, the real bean, not replaced) on JMS (embedded Artemis, Boot's transacted sessions) with a
 * short {@code spring.lifecycle.timeout-per-shutdown-phase} (1 s): the container's stop phase gives
 * up behind a held send, so the guard's close begins while the delivery is still in the listener
 * (its outcome waits for the session's commit). The send ends within the guard's grace period. SPEC
 * 1/14: the send is recorded (the delivery commits before the container's destroy closes its
 * session), and the message published again to the restarted application is a replay: one provider
 * send, nothing claimed again, nothing dead-lettered.
 */
class JmsShutdownPhaseTimeoutProbeTest {

  @Test
  void aDeliveryRunningWhenTheGuardStartsClosingIsRecorded() throws Exception {
    SwitchableKeyStore store = new SwitchableKeyStore();
    SuiteProvider provider = new SuiteProvider();
    CountDownLatch closing = new CountDownLatch(1);
    String queue = "idem.suite.phase." + UUID.randomUUID();
    String key = Waits.newKey("jms-phase");
    JmsListenerApplication app =
        JmsListenerApplication.start(
            store, provider, closing, queue, "spring.lifecycle.timeout-per-shutdown-phase=1s");
    CountDownLatch release = new CountDownLatch(1);
    CountDownLatch started = provider.holdNext(release);
    app.publish(key, key);
    assertThat(started.await(Waits.SECONDS, TimeUnit.SECONDS)).as("the send started").isTrue();
    IdempotencyGuard guard = app.guard();

    CompletableFuture<Void> closed = CompletableFuture.runAsync(app::close);
    assertThat(closing.await(Waits.SECONDS, TimeUnit.SECONDS)).as("the shutdown began").isTrue();
    // the container's phase times out (1 s) and the starter's phase starts closing the guard
    Waits.await("the guard closing", () -> closedFor(guard));
    release.countDown();
    closed.get(Waits.SECONDS, TimeUnit.SECONDS);
    assertThat(provider.sends(key)).as("the held send finished").isEqualTo(1);

    try (JmsListenerApplication again =
        JmsListenerApplication.start(store, provider, new CountDownLatch(1), queue)) {
      again.publish(key, key);
      Waits.await(
          "the messages handled (a replay each)",
          () -> again.events().count(Type.REPLAYED, SuiteJmsApplication.LISTENER, key) >= 1);
      again.awaitAcknowledged();
      assertThat(provider.sends(key)).as("one provider send").isEqualTo(1);
      assertThat(again.events().count(Type.CLAIMED, SuiteJmsApplication.LISTENER, key))
          .as("nothing claimed again after the restart")
          .isZero();
      assertThat(again.deadLettered()).isEmpty();
    }
  }

  /**
   * Whether a call on the guard is refused as closed (a call that is not refused sends nothing).
   */
  private static boolean closedFor(IdempotencyGuard guard) {
    try {
      guard.execute(
          "probe-closing:" + UUID.randomUUID(), Duration.ofMinutes(1), context -> "nothing");
      return false;
    } catch (IllegalStateException e) {
      return true;
    }
  }
}
