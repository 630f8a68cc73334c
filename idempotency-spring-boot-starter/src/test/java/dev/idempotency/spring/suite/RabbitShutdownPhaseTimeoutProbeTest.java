package dev.idempotency.spring.suite;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Probe (probeT) of the starter's shutdown phase ({@code GuardShutdown}, {@code DEFAULT_PHASE -
 * 4096}) on RabbitMQ with a short {@code spring.lifecycle.timeout-per-shutdown-phase} (1 s): the
 * container's stop phase gives up while its consumer still has prefetched messages behind a held
 * send (a container that is not force-stopped handles what it prefetched), so the guard is closed
 * while the container still delivers. With and without Spring Boot's listener retry ({@code
 * spring.rabbitmq.listener.simple.retry.enabled}, whose recoverer rejects without requeue: the
 * queue dead-letters to its {@code .dlq}). SPEC 1 (no lost send): a message that meets the closed
 * guard must come back, not be acknowledged or dead-lettered without its send; the application
 * started again on the same queue and store sends each once.
 */
class RabbitShutdownPhaseTimeoutProbeTest {

  @ParameterizedTest
  @ValueSource(booleans = {false, true})
  void messagesDeliveredAfterTheGuardClosedAreNotLost(boolean bootRetry) throws Exception {
    SwitchableKeyStore store = new SwitchableKeyStore();
    SuiteProvider provider = new SuiteProvider();
    CountDownLatch closing = new CountDownLatch(1);
    String queue = "idem.suite.phase." + UUID.randomUUID();
    String first = Waits.newKey("first");
    String second = Waits.newKey("second");
    String third = Waits.newKey("third");
    String[] properties = {
      "spring.lifecycle.timeout-per-shutdown-phase=1s",
      "spring.rabbitmq.listener.simple.retry.enabled=" + bootRetry,
      "spring.rabbitmq.listener.simple.retry.initial-interval=100ms"
    };
    RabbitListenerApplication app =
        RabbitListenerApplication.start(store, provider, closing, queue, false, properties);
    CountDownLatch release = new CountDownLatch(1);
    CountDownLatch started = provider.holdNext(release);
    app.publish(first, first);
    assertThat(started.await(Waits.SECONDS, TimeUnit.SECONDS))
        .as("the first send started")
        .isTrue();
    app.publish(second, second);
    app.publish(third, third);
    IdempotencyGuard guard = app.guard();

    CompletableFuture<Void> closed = CompletableFuture.runAsync(app::close);
    assertThat(closing.await(Waits.SECONDS, TimeUnit.SECONDS)).as("the shutdown began").isTrue();
    Waits.await("the guard closing", () -> closedFor(guard));
    release.countDown();
    closed.get(Waits.SECONDS, TimeUnit.SECONDS);
    assertThat(provider.sends(first)).as("the held send finished").isEqualTo(1);

    try (RabbitListenerApplication again =
        RabbitListenerApplication.start(
            store, provider, new CountDownLatch(1), queue, false, properties)) {
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      while (System.nanoTime() < deadline
          && (provider.sends(second) == 0 || provider.sends(third) == 0)) {
        Thread.sleep(100);
      }
      assertThat(again.deadLettered())
          .as("dead-lettered (messages that met the closed guard), retry " + bootRetry)
          .isEmpty();
      assertThat(provider.sends(first)).as("first: one provider send").isEqualTo(1);
      assertThat(provider.sends(second))
          .as("second: one provider send (none is a lost send), retry " + bootRetry)
          .isEqualTo(1);
      assertThat(provider.sends(third))
          .as("third: one provider send (none is a lost send), retry " + bootRetry)
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
