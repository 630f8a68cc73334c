package dev.idempotency.spring.suite;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * Issue 37 (found by probe42l): the JMS listener's send outlives the application's shutdown phase
 * ({@code spring.lifecycle.timeout-per-shutdown-phase=1s}), so Spring's {@code
 * DefaultMessageListenerContainer} shuts down while the send runs. Its {@code doShutdown} then
 * interrupts the consumer's thread once per receive timeout for as long as the invoker is inside
 * {@code receiveAndExecute} (listener and session commit included); {@code
 * spring.jms.listener.receive-timeout=1ms} makes that interrupt come at once instead of within a
 * second (Boot's default). The send then ends. SPEC 14/16: its outcome is recorded (within the
 * close grace period), never a release of a key whose send happened; another consumer of the store
 * (the redelivery, or a republished copy) replays it.
 *
 * <p>Fixed: the interrupt landed in Artemis's blocking session commit, which the starter makes
 * before it records ({@code ActiveMQInterruptedException}), and the starter took the failed commit
 * for a rollback and released the key, so the next delivery of the key sent again. A commit that an
 * interrupt failed is now tried again with the interrupt held back, and never releases the key
 * ({@code JmsSessionCommit}).
 *
 * <p>The starter now closes the guard in a lifecycle phase before the beans are destroyed ({@code
 * GuardShutdown}), so a send that outlives the container's stop phase ends within the guard's
 * close, before the container's {@code doShutdown} interrupts anything. The interrupt still comes
 * where the guard is closed at bean destruction (a parent context's guard, for a child context that
 * closes; an application that replaces the bean {@code idempotencyGuardShutdown}): this test does
 * the latter, to keep the interrupt in the commit.
 */
class JmsShutdownInterruptTest {

  /** Replaces the starter's guard shutdown phase: the guard is closed on destroy, as before. */
  @Configuration(proxyBeanMethods = false)
  static class GuardClosedOnDestroy {
    @Bean
    Object idempotencyGuardShutdown() {
      return new Object();
    }
  }

  @Test
  void aSendThatOutlivesTheShutdownPhaseIsRecordedThoughTheContainerInterruptsItsThread()
      throws Exception {
    SwitchableKeyStore store = new SwitchableKeyStore();
    SuiteProvider provider = new SuiteProvider();
    CountDownLatch closing = new CountDownLatch(1);
    String queue = "idem.probe-jms-shutdown-" + UUID.randomUUID();
    JmsListenerApplication application =
        JmsListenerApplication.start(
            store,
            provider,
            closing,
            queue,
            new Class<?>[] {GuardClosedOnDestroy.class},
            "spring.lifecycle.timeout-per-shutdown-phase=1s",
            "spring.jms.listener.receive-timeout=1ms");
    String key = Waits.newKey("probe-jms-shutdown");
    CountDownLatch release = new CountDownLatch(1);
    CountDownLatch started = provider.holdNext(release);
    application.publish(key, key);
    assertThat(started.await(Waits.SECONDS, TimeUnit.SECONDS)).as("the send started").isTrue();
    CompletableFuture<Void> closed = CompletableFuture.runAsync(application::close);
    assertThat(closing.await(Waits.SECONDS, TimeUnit.SECONDS)).as("the shutdown began").isTrue();
    // the container's doShutdown runs: it interrupts the consumer's thread (the send ignores it)
    Waits.await(
        "the container's doShutdown",
        () ->
            inMethod(
                "org.springframework.jms.listener.DefaultMessageListenerContainer", "doShutdown"));
    release.countDown();
    closed.get(Waits.SECONDS, TimeUnit.SECONDS);
    assertThat(provider.sends(key)).as("the held send finished").isEqualTo(1);

    assertThat(whatAnotherConsumerFinds(store, key))
        .as("what the next delivery of the key finds once the application closed")
        .isEqualTo("replayed");
  }

  /** Whether a thread of this JVM is in {@code className.method}. */
  private static boolean inMethod(String className, String method) {
    return Thread.getAllStackTraces().values().stream()
        .flatMap(java.util.Arrays::stream)
        .anyMatch(
            frame ->
                frame.getClassName().equals(className) && frame.getMethodName().equals(method));
  }

  /** {@code "replayed"}, {@code "sent"} (the key was released) or {@code "in progress"}. */
  private static String whatAnotherConsumerFinds(SwitchableKeyStore store, String key) {
    try (IdempotencyGuard elsewhere = IdempotencyGuard.builder().store(store).build()) {
      boolean[] ran = new boolean[1];
      elsewhere.execute(
          IdempotencyKey.of(SuiteJmsApplication.LISTENER, key),
          Duration.ofHours(24),
          context -> {
            ran[0] = true;
            return "probe";
          });
      return ran[0] ? "sent" : "replayed";
    } catch (IdempotencyInProgressException inProgress) {
      return "in progress";
    }
  }
}
