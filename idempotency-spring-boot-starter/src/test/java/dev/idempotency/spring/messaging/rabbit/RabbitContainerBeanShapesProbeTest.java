package dev.idempotency.spring.messaging.rabbit;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.core.Declarables;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.rabbit.config.SimpleRabbitListenerContainerFactory;
import org.springframework.amqp.rabbit.connection.ConnectionFactory;
import org.springframework.amqp.rabbit.listener.AbstractMessageListenerContainer;
import org.springframework.amqp.rabbit.listener.DirectMessageListenerContainer;
import org.springframework.amqp.rabbit.listener.SimpleMessageListenerContainer;
import org.springframework.amqp.rabbit.listener.adapter.MessageListenerAdapter;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.test.annotation.DirtiesContext;

/**
 * probeE, on a real RabbitMQ broker: guarded listeners' container beans of shapes the
 * container-bean checks (c990be4, 0c1c17a) were not tested with: one built with the factory's
 * {@code createListenerContainer()} and initialized in its {@code @Bean} method (with the factory's
 * chain, the starter's in it: neither refused nor advised twice), a {@link
 * DirectMessageListenerContainer} bean, and the latter stopped and started again. Each must send a
 * duplicate once and dead-letter a message without a key (rejected by the starter's advice; without
 * it the container would requeue it without end).
 *
 * <p>No failure: Boot 3.5 3/3 (19.0 s; 44.2 s at a load average of 35), Boot 4.0 3/3 (22.5 s; 56.4
 * s), on a loaded machine; in the extended group (over 15 s a line).
 */
@Tag("extended")
@SpringBootTest(
    classes = RabbitContainerBeanShapesProbeTest.App.class,
    properties = "logging.level.org.springframework.amqp.rabbit.listener=OFF")
@DirtiesContext
class RabbitContainerBeanShapesProbeTest extends RabbitProbeSupport {

  static final String INITIALIZED_QUEUE = "idem.bean-shapes.initialized-with-chain";
  static final String DIRECT_QUEUE = "idem.bean-shapes.direct";

  public static class Listeners {
    static final List<String> sent = new CopyOnWriteArrayList<>();

    @IdempotentListener(name = "bean-shapes-initialized")
    public void initialized(String event) {
      sent.add(event);
    }

    @IdempotentListener(name = "bean-shapes-direct")
    public void direct(String event) {
      sent.add(event);
    }
  }

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ListenerTestConfiguration.class)
  static class App {
    @Bean
    Listeners beanShapesListeners() {
      return new Listeners();
    }

    @Bean
    Declarables beanShapesQueues() {
      return deadLetteredQueues(INITIALIZED_QUEUE, DIRECT_QUEUE);
    }

    /** Built with Boot's factory (its chain has the starter's advice) and initialized here. */
    @Bean
    SimpleMessageListenerContainer initializedWithTheFactorysChain(
        @Qualifier("rabbitListenerContainerFactory") SimpleRabbitListenerContainerFactory factory,
        Listeners listeners) {
      SimpleMessageListenerContainer container =
          factoryContainer(factory, INITIALIZED_QUEUE, listeners, "initialized");
      container.afterPropertiesSet();
      return container;
    }

    /** A direct container, its listener set here, no chain of the application's. */
    @Bean
    DirectMessageListenerContainer directContainerBean(
        ConnectionFactory connectionFactory, Listeners listeners) {
      DirectMessageListenerContainer container =
          new DirectMessageListenerContainer(connectionFactory);
      container.setQueueNames(DIRECT_QUEUE);
      container.setMessageListener(new MessageListenerAdapter(listeners, "direct"));
      return container;
    }
  }

  @Override
  List<String> sends() {
    return Listeners.sent;
  }

  @Autowired
  @Qualifier("directContainerBean")
  AbstractMessageListenerContainer direct;

  @Test
  void aContainerBeanInitializedInItsBeanMethodWithTheFactorysChainIsGuardedOnce()
      throws Exception {
    sendsOnceAndDeadLettersAKeylessMessage(INITIALIZED_QUEUE, "init");
  }

  @Test
  void aDirectContainerBeanIsGuarded() throws Exception {
    sendsOnceAndDeadLettersAKeylessMessage(DIRECT_QUEUE, "direct");
  }

  @Test
  void aDirectContainerBeanStoppedAndStartedAgainIsStillGuarded() throws Exception {
    direct.stop();
    direct.start();
    sendsOnceAndDeadLettersAKeylessMessage(DIRECT_QUEUE, "restarted");
  }

  private void sendsOnceAndDeadLettersAKeylessMessage(String queue, String prefix)
      throws Exception {
    String event = unique(prefix);
    plain.send("", queue, message(event));
    plain.send("", queue, message(event)); // a duplicate: same payload, same key
    String keyless = unique(prefix + "-keyless");
    plain.send("", queue, withoutKey(keyless));
    Message deadLetter = plain.receive(queue + DEAD_LETTERS, 45_000);
    assertThat(deadLetter).as("the message without a key, dead-lettered").isNotNull();
    assertThat(new String(deadLetter.getBody(), StandardCharsets.UTF_8)).isEqualTo(keyless);
    awaitMarker(queue, prefix);

    assertThat(new int[] {sent(event), sent(keyless)})
        .as("sends of the duplicated event, of the keyless one")
        .containsExactly(1, 0);
  }
}
