package dev.idempotency.spring.suite;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.IdempotencyRecord;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.SpringVersion;

/**
 * Issue 37 (found by probe42l): the JMS listener's send outlives the application's shutdown phase
 * ({@code spring.lifecycle.timeout-per-shutdown-phase=1s}), so Spring's {@code
 * DefaultMessageListenerContainer} shuts down while the send runs, and its {@code doShutdown}
 * interrupts the consumer's thread ({@code spring.jms.listener.receive-timeout=1ms} makes that come
 * at once instead of within a second, Boot's default). The send then ends. SPEC 14/16: never a
 * release of a key whose send happened; SPEC 15: an outcome is recorded only for a delivery whose
 * transaction committed. What the container does next depends on Spring Framework's line:
 *
 * <ul>
 *   <li>Up to 6.2.17 and 7.0.6 (Spring Boot 3.5 here, 6.2.12): it interrupts the thread once per
 *       receive timeout for as long as the delivery runs, and waits for it; an interrupt can land
 *       in the starter's session commit ({@code ActiveMQInterruptedException}), which is then tried
 *       again with the interrupt held back ({@code JmsSessionCommit}). The delivery commits and its
 *       outcome is recorded: another consumer of the store replays it.
 *   <li>From 6.2.18 and 7.0.7 on (Spring Boot 4.0 here, 7.0.8; gh-36506): it interrupts once, waits
 *       one more receive timeout, then gives up, closes the delivery's session and connection and
 *       goes on closing the application. The starter's commit then fails ("Session is closed")
 *       without reaching the broker, which delivers the message again: the key is left claimed,
 *       neither recorded (the transaction did not commit) nor released (a redelivery would send
 *       again at once), until its lease runs out, as after a crash.
 * </ul>
 *
 * <p>Formerly this test waited for a thread in {@code doShutdown} and asserted a replay on both
 * lines: on 7.0.8 {@code doShutdown} lasts about two receive timeouts, so a 20 ms poll mostly
 * missed it (a 90 s wait, then a failure), and when it was seen, the send and its commit raced the
 * session's close; the commit that lost failed, and the starter released the key (a second send for
 * the next delivery). Now the test waits for the interrupt itself, and on the newer line for {@code
 * doShutdown} to return (the session closed) before it lets the send finish.
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
  void aSendThatOutlivesTheShutdownPhaseIsNeverReleasedWhateverTheContainerDoesToItsThread()
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
    CountDownLatch interrupted = new CountDownLatch(1);
    CountDownLatch started = provider.holdNext(release, interrupted);
    application.publish(key, key);
    assertThat(started.await(Waits.SECONDS, TimeUnit.SECONDS)).as("the send started").isTrue();
    CompletableFuture<Void> closed = CompletableFuture.runAsync(application::close);
    assertThat(closing.await(Waits.SECONDS, TimeUnit.SECONDS)).as("the shutdown began").isTrue();
    // the container's doShutdown interrupts the consumer's thread (the held send ignores it)
    assertThat(interrupted.await(Waits.SECONDS, TimeUnit.SECONDS))
        .as("the container's doShutdown interrupted the send's thread")
        .isTrue();
    boolean containerGivesUp = containerGivesUpAtShutdown();
    if (containerGivesUp) {
      // it waits one more receive timeout, closes the delivery's session and returns
      Waits.await(
          "the container's doShutdown to give up on the delivery",
          () ->
              !inMethod(
                  "org.springframework.jms.listener.DefaultMessageListenerContainer",
                  "doShutdown"));
    }
    release.countDown();
    closed.get(Waits.SECONDS, TimeUnit.SECONDS);
    assertThat(provider.sends(key)).as("the held send finished").isEqualTo(1);

    IdempotencyRecord record = recordOf(store, key);
    if (containerGivesUp) {
      assertThat(record.state())
          .as(
              "Spring %s closed the delivery's session before its commit: the key is left claimed,"
                  + " never released",
              SpringVersion.getVersion())
          .isEqualTo(RecordState.IN_PROGRESS);
      assertThat(record.attempt()).isEqualTo(1);
    } else {
      assertThat(record.state())
          .as(
              "Spring %s let the delivery commit: its outcome is recorded",
              SpringVersion.getVersion())
          .isEqualTo(RecordState.COMPLETED);
      assertThat(whatAnotherConsumerFinds(store, key))
          .as("what the next delivery of the key finds once the application closed")
          .isEqualTo("replayed");
    }
  }

  /**
   * Whether this Spring Framework's {@code DefaultMessageListenerContainer} stops waiting for a
   * delivery one receive timeout after its interrupt, and closes its session (gh-36506: 6.2.18 and
   * 7.0.7 on).
   */
  static boolean containerGivesUpAtShutdown() {
    String version = SpringVersion.getVersion();
    assertThat(version).as("Spring Framework's version").isNotNull();
    String[] parts = version.split("[.-]");
    int major = Integer.parseInt(parts[0]);
    int minor = Integer.parseInt(parts[1]);
    int patch = Integer.parseInt(parts[2]);
    if (major != 6 && major != 7) {
      return major > 7;
    }
    if (major == 6) {
      return minor > 2 || (minor == 2 && patch >= 18);
    }
    return minor > 0 || patch >= 7;
  }

  /** Whether a thread of this JVM is in {@code className.method}. */
  private static boolean inMethod(String className, String method) {
    return Thread.getAllStackTraces().values().stream()
        .flatMap(java.util.Arrays::stream)
        .anyMatch(
            frame ->
                frame.getClassName().equals(className) && frame.getMethodName().equals(method));
  }

  /** The key's record, as the store holds it (a released key has none). */
  private static IdempotencyRecord recordOf(SwitchableKeyStore store, String key) {
    try (IdempotencyGuard elsewhere = IdempotencyGuard.builder().store(store).build()) {
      return elsewhere
          .find(IdempotencyKey.of(SuiteJmsApplication.LISTENER, key))
          .orElseThrow(() -> new AssertionError("the key was released: it has no record"));
    }
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
