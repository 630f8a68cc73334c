package dev.idempotency.spring.suite;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyEvent.Type;
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
      provider.interruptAndFailNextSend();
      application.publish(key, key);
      Waits.await("the redelivered send", () -> provider.sends(key) >= 1);
      Waits.await(
          "the outcome recorded",
          () -> application.events().count(Type.COMPLETED, entry.operation(), key) == 1);
      String next = Waits.newKey(entry);
      application.publish(next, next);
      Waits.await("the next message's send", () -> provider.sends(next) == 1);
      application.awaitAcknowledged();

      application.publish(key, key);
      Waits.await(
          "the replay",
          () -> application.events().count(Type.REPLAYED, entry.operation(), key) >= 1);
      application.awaitAcknowledged();
      assertThat(provider.sends(key)).as("one provider send").isEqualTo(1);
      assertThat(application.deadLettered()).isEmpty();
      assertThat(application.consumerFailures())
          .as("the consumer's own failures after the interrupted delivery")
          .isEmpty();
    }
  }
}
