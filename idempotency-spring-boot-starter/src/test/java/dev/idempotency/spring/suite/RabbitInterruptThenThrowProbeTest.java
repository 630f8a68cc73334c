package dev.idempotency.spring.suite;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Issue 37 re-probe (probe37e): {@link ListenerInterruptThenThrowTest}'s probe on the RabbitMQ
 * listener, which it does not run: the provider call interrupts the consumer thread and fails. The
 * promise (SPEC 1, 6, 15, 16): released, redelivered and sent once, the consumer goes on, nothing
 * dead-lettered, a republished message is a replay.
 */
@Tag("open-finding")
class RabbitInterruptThenThrowProbeTest {

  @Test
  void anInterruptedFailedSendOnRabbitIsReleasedAndRedeliveredOnce() throws Exception {
    ListenerEntryPoint entry = ListenerEntryPoint.RABBIT;
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
