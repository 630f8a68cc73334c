package dev.idempotency.spring.suite;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.SwitchableKeyStore;
import jakarta.jms.ConnectionFactory;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jms.config.DefaultJmsListenerContainerFactory;
import org.springframework.jms.config.JmsListenerEndpointRegistry;
import org.springframework.jms.connection.JmsTransactionManager;
import org.springframework.jms.listener.DefaultMessageListenerContainer;
import org.springframework.test.util.ReflectionTestUtils;

/**
 * Issue 37 re-probe (probe37e): the suite's JMS listener whose container has a {@link
 * JmsTransactionManager} (docs/message-consumers.md names it, "tested without a transaction
 * manager"), and whose provider call leaves the thread interrupted after a send that succeeded or
 * one that failed. The promise (SPEC 1, 15, 16): sent once (a failed send redelivered), the
 * consumer goes on, a republished message is a replay, nothing dead-lettered, and the container's
 * own commit does not fail (it did on the interrupt the starter set again after its commit).
 */
class JmsTransactionManagerInterruptProbeTest {

  @ParameterizedTest
  @ValueSource(booleans = {false, true})
  void anInterruptedSendInAJmsTransactionManagersTransactionIsSentOnce(boolean failFirst)
      throws Exception {
    SuiteProvider provider = new SuiteProvider();
    String operation = SuiteJmsApplication.LISTENER;
    String key = Waits.newKey("probe-jms-tm-" + failFirst);
    try (JmsListenerApplication application =
        JmsListenerApplication.start(
            new SwitchableKeyStore(),
            provider,
            new CountDownLatch(1),
            "idem.suite." + UUID.randomUUID(),
            new Class<?>[] {TransactionManagerFactory.class})) {
      DefaultMessageListenerContainer container =
          (DefaultMessageListenerContainer)
              application
                  .context()
                  .getBean(JmsListenerEndpointRegistry.class)
                  .getListenerContainer(operation);
      assertThat(ReflectionTestUtils.getField(container, "transactionManager"))
          .as("the container's transaction manager")
          .isInstanceOf(JmsTransactionManager.class);
      InterruptedDeliveries.assertSentOnce(
          application, provider, operation, key, "probe-jms-tm-next", failFirst);
      assertThat(application.consumerFailures())
          .as("the container's own failures after the interrupted delivery")
          .isEmpty();
    }
  }

  /**
   * The application's listener container factory: a transacted session, as Boot's, with a
   * JmsTransactionManager (built by hand: Boot's configurer moved package in Boot 4).
   */
  @Configuration(proxyBeanMethods = false)
  static class TransactionManagerFactory {
    @Bean
    DefaultJmsListenerContainerFactory jmsListenerContainerFactory(ConnectionFactory connections) {
      DefaultJmsListenerContainerFactory factory = new DefaultJmsListenerContainerFactory();
      factory.setConnectionFactory(connections);
      factory.setSessionTransacted(true);
      factory.setTransactionManager(new JmsTransactionManager(connections));
      return factory;
    }
  }
}
