package dev.idempotency.spring.messaging.rabbit;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import dev.idempotency.testservers.RabbitMqServer;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.core.Declarables;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.core.MessageProperties;
import org.springframework.amqp.core.Queue;
import org.springframework.amqp.core.QueueBuilder;
import org.springframework.amqp.rabbit.config.SimpleRabbitListenerContainerFactory;
import org.springframework.amqp.rabbit.connection.ConnectionFactory;
import org.springframework.amqp.rabbit.core.RabbitTemplate;
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
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

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
class RabbitContainerBeanShapesProbeTest {

  static final String INITIALIZED_QUEUE = "idem.bean-shapes.initialized-with-chain";
  static final String DIRECT_QUEUE = "idem.bean-shapes.direct";
  static final String DEAD_LETTERS = ".dead-letters";

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
      return new Declarables(
          deadLettered(INITIALIZED_QUEUE),
          QueueBuilder.nonDurable(INITIALIZED_QUEUE + DEAD_LETTERS).build(),
          deadLettered(DIRECT_QUEUE),
          QueueBuilder.nonDurable(DIRECT_QUEUE + DEAD_LETTERS).build());
    }

    /** Built with Boot's factory (its chain has the starter's advice) and initialized here. */
    @Bean
    SimpleMessageListenerContainer initializedWithTheFactorysChain(
        @Qualifier("rabbitListenerContainerFactory") SimpleRabbitListenerContainerFactory factory,
        Listeners listeners) {
      SimpleMessageListenerContainer container = factory.createListenerContainer();
      container.setQueueNames(INITIALIZED_QUEUE);
      container.setReceiveTimeout(100L);
      container.setMessageListener(new MessageListenerAdapter(listeners, "initialized"));
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

    private static Queue deadLettered(String name) {
      return QueueBuilder.nonDurable(name)
          .deadLetterExchange("")
          .deadLetterRoutingKey(name + DEAD_LETTERS)
          .build();
    }
  }

  @DynamicPropertySource
  static void rabbit(DynamicPropertyRegistry registry) {
    registry.add("spring.rabbitmq.host", () -> "127.0.0.1");
    registry.add("spring.rabbitmq.port", () -> RabbitMqServer.shared().port());
    for (String property : ListenerTestConfiguration.PROPERTIES) {
      int equals = property.indexOf('=');
      registry.add(property.substring(0, equals), () -> property.substring(equals + 1));
    }
  }

  @Autowired RabbitTemplate plain;

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
    plain.send("", queue, message(event, true));
    plain.send("", queue, message(event, true)); // a duplicate: same payload, same key
    String keyless = unique(prefix + "-keyless");
    plain.send("", queue, message(keyless, false));
    Message deadLetter = plain.receive(queue + DEAD_LETTERS, 45_000);
    assertThat(deadLetter).as("the message without a key, dead-lettered").isNotNull();
    assertThat(new String(deadLetter.getBody(), StandardCharsets.UTF_8)).isEqualTo(keyless);
    String marker = unique(prefix + "-marker");
    plain.send("", queue, message(marker, true));
    await("the marker sent", () -> sent(marker) >= 1);

    assertThat(new int[] {sent(event), sent(keyless)})
        .as("sends of the duplicated event, of the keyless one")
        .containsExactly(1, 0);
  }

  private static int sent(String event) {
    return (int) Listeners.sent.stream().filter(event::equals).count();
  }

  private static Message message(String payload, boolean keyed) {
    MessageProperties properties = new MessageProperties();
    properties.setContentType(MessageProperties.CONTENT_TYPE_TEXT_PLAIN);
    if (keyed) {
      properties.setHeader("Idempotency-Key", "key-" + payload);
    }
    return new Message(payload.getBytes(StandardCharsets.UTF_8), properties);
  }

  private static String unique(String what) {
    return what + "-" + UUID.randomUUID();
  }

  /** Bounded polling: generous, the machine is busy. */
  private static void await(String what, BooleanSupplier condition) throws InterruptedException {
    long deadline = System.nanoTime() + 45_000_000_000L;
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("timed out after 45 s waiting for " + what);
      }
      Thread.sleep(20);
    }
  }
}
