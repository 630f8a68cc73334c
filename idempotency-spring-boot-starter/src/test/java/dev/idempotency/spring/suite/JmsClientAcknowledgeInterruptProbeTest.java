package dev.idempotency.spring.suite;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.jms.config.JmsListenerEndpointRegistry;
import org.springframework.jms.listener.DefaultMessageListenerContainer;

/**
 * Issue 37 re-probe (probe37e): the suite's JMS listener on a {@code CLIENT_ACKNOWLEDGE} session
 * that is not transacted ({@code spring.jms.listener.session.*}), whose provider call leaves the
 * thread interrupted after a send that succeeded or one that failed. The promise (SPEC 1, 15, 16):
 * the message is sent once (a failed send is redelivered), the consumer goes on, and a republished
 * message is a replay. It failed now and then (the next message's publish: "Connection is closed")
 * while the interrupt was left on the thread: the container's acknowledgement or next receive
 * failed on it, and the container dropped the connection its application shared.
 */
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
      InterruptedDeliveries.assertSentOnce(
          application, provider, operation, key, "probe-jms-client-ack-next", failFirst);
      assertThat(application.consumerFailures())
          .as("the container's own failures after the interrupted delivery")
          .isEmpty();
    }
  }
}
