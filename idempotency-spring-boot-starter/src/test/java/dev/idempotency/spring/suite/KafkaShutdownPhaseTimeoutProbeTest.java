package dev.idempotency.spring.suite;

import static org.assertj.core.api.Assertions.assertThat;

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
 * 4096}) with a short {@code spring.lifecycle.timeout-per-shutdown-phase}: the Kafka container's
 * stop phase gives up after 1 s while its consumer is still in the middle of one poll (three
 * records fetched together, the first one's send held), so the guard is closed while the container
 * still delivers. The held send finishes and is recorded (the guard's grace); the two records after
 * it meet a closed guard. SPEC 1 (no lost send): those two must not be acknowledged or
 * dead-lettered without their sends; the application started again on the same topic, group and
 * store sends each once.
 */
class KafkaShutdownPhaseTimeoutProbeTest {

  @Test
  void recordsDeliveredAfterTheGuardClosedAreNotLost() throws Exception {
    SwitchableKeyStore store = new SwitchableKeyStore();
    SuiteProvider provider = new SuiteProvider();
    CountDownLatch closing = new CountDownLatch(1);
    String topic = "idem.suite.phase." + UUID.randomUUID();
    String first = Waits.newKey("first");
    String second = Waits.newKey("second");
    String third = Waits.newKey("third");
    KafkaListenerApplication app =
        KafkaListenerApplication.start(
            store,
            provider,
            closing,
            topic,
            "false",
            new Class<?>[0],
            "spring.lifecycle.timeout-per-shutdown-phase=1s");
    CountDownLatch release = new CountDownLatch(1);
    CountDownLatch started = provider.holdNext(release);
    app.publishInOneBatch(first, second, third);
    assertThat(started.await(Waits.SECONDS, TimeUnit.SECONDS))
        .as("the first send started")
        .isTrue();
    IdempotencyGuard guard = app.guard();

    CompletableFuture<Void> closed = CompletableFuture.runAsync(app::close);
    assertThat(closing.await(Waits.SECONDS, TimeUnit.SECONDS)).as("the shutdown began").isTrue();
    // the container's phase times out (1 s) and the starter's phase closes the guard
    Waits.await("the guard closing", () -> closedFor(guard));
    release.countDown();
    closed.get(Waits.SECONDS, TimeUnit.SECONDS);
    assertThat(provider.sends(first)).as("the held send finished").isEqualTo(1);

    try (KafkaListenerApplication again =
        KafkaListenerApplication.start(
            store, provider, new CountDownLatch(1), topic, "false", new Class<?>[0])) {
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      while (System.nanoTime() < deadline
          && (provider.sends(second) == 0 || provider.sends(third) == 0)) {
        Thread.sleep(100);
      }
      again.awaitAcknowledged();
      assertThat(again.deadLettered())
          .as("dead-lettered (the second and third records met the closed guard)")
          .isEmpty();
      assertThat(provider.sends(first)).as("first: one provider send").isEqualTo(1);
      assertThat(provider.sends(second))
          .as("second: one provider send (none is a lost send)")
          .isEqualTo(1);
      assertThat(provider.sends(third))
          .as("third: one provider send (none is a lost send)")
          .isEqualTo(1);
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
