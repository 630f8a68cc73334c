package dev.idempotency.spring.suite;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.api.Test;

/**
 * A listener whose provider call interrupts its thread and then fails (nothing sent). The key is
 * released, the message is redelivered and sent once, the consumer goes on (the next message is
 * sent, no poll or commit failed), nothing is dead-lettered, and a republished message is a replay
 * (SPEC 6, 15, 16).
 */
class ListenerInterruptThenThrowTest {

  /**
   * The JMS listener (found by the probefinal re-probe): the failure reached Spring's container
   * with the thread still interrupted; the session's rollback failed on it (Artemis:
   * ActiveMQInterruptedException, "Application exception overridden by rollback error"), the
   * message was acknowledged a moment later and never redelivered: nothing was ever sent for it.
   * The interrupt is now cleared before the rollback. (The Kafka record and batch listeners held
   * the same probe.)
   */
  @Test
  void anInterruptedFailedSendOnJmsIsReleasedAndRedeliveredOnce() throws Exception {
    assertReleasedAndRedeliveredOnce(ListenerEntryPoint.JMS);
  }

  /**
   * Starts {@code entry}'s application, has its provider call interrupt the thread and fail, and
   * checks the promise above (also {@link RabbitInterruptThenThrowProbeTest}'s).
   */
  static void assertReleasedAndRedeliveredOnce(ListenerEntryPoint entry) throws Exception {
    SuiteProvider provider = new SuiteProvider();
    String key = Waits.newKey(entry);
    try (ListenerApplication application =
        entry.start(
            new SwitchableKeyStore(),
            provider,
            new CountDownLatch(1),
            "idem.suite." + UUID.randomUUID())) {
      InterruptedDeliveries.assertSentOnce(
          application, provider, entry.operation(), key, entry, true);
      assertThat(application.consumerFailures())
          .as("the consumer's own failures after the interrupted delivery")
          .isEmpty();
    }
  }
}
