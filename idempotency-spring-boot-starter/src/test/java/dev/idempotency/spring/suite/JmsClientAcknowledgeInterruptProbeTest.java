package dev.idempotency.spring.suite;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.jms.config.JmsListenerEndpointRegistry;
import org.springframework.jms.listener.DefaultMessageListenerContainer;

/**
 * Issue 37 re-probe (probe37e): the suite's JMS listener on a {@code CLIENT_ACKNOWLEDGE} session
 * that is not transacted ({@code spring.jms.listener.session.*}), whose provider call leaves the
 * thread interrupted after a send that succeeded or one that failed. The promise (SPEC 1, 15, 16):
 * the message is sent once (a failed send is redelivered), the consumer goes on, and a republished
 * message is a replay.
 */
@Tag("open-finding")
class JmsClientAcknowledgeInterruptProbeTest {

  @ParameterizedTest
  @ValueSource(booleans = {false, true})
  void anInterruptedSendOnAClientAcknowledgedSessionIsSentOnce(boolean failFirst) throws Exception {
    SuiteProvider provider = new SuiteProvider();
    String operation = SuiteJmsApplication.LISTENER;
    String key = Waits.newKey("probe-jms-client-ack-" + failFirst);
    try (JmsListenerApplication application =
        JmsListenerApplication.start(
            new SwitchableKeyStore(),
            provider,
            new CountDownLatch(1),
            "idem.suite." + UUID.randomUUID(),
            "spring.jms.listener.session.transacted=false",
            "spring.jms.listener.session.acknowledge-mode=client")) {
      DefaultMessageListenerContainer container =
          (DefaultMessageListenerContainer)
              application
                  .context()
                  .getBean(JmsListenerEndpointRegistry.class)
                  .getListenerContainer(operation);
      assertThat(container.isSessionTransacted()).as("a session not transacted").isFalse();
      assertThat(container.getSessionAcknowledgeMode())
          .as("CLIENT_ACKNOWLEDGE")
          .isEqualTo(jakarta.jms.Session.CLIENT_ACKNOWLEDGE);
      if (failFirst) {
        provider.interruptAndFailNextSend();
      } else {
        provider.interruptSenders(true);
      }
      application.publish(key, key);
      Waits.await("the send", () -> provider.sends(key) >= 1);
      provider.interruptSenders(false);
      Waits.await(
          "the outcome recorded",
          () -> application.events().count(Type.COMPLETED, operation, key) == 1);
      String next = Waits.newKey("probe-jms-client-ack-next");
      application.publish(next, next);
      Waits.await(
          "the next message's send (the consumer goes on)", () -> provider.sends(next) == 1);
      application.awaitAcknowledged();

      application.publish(key, key);
      Waits.await(
          "the replay", () -> application.events().count(Type.REPLAYED, operation, key) >= 1);
      application.awaitAcknowledged();
      assertThat(provider.sends(key)).as("one provider send").isEqualTo(1);
      assertThat(application.deadLettered()).isEmpty();
    }
  }
}
