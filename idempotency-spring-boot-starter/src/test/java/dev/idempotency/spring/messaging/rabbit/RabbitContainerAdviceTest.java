package dev.idempotency.spring.messaging.rabbit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import dev.idempotency.testservers.Poll;
import dev.idempotency.testservers.RabbitMqServer;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import org.aopalliance.intercept.MethodInterceptor;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.core.Declarables;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.core.MessageBuilder;
import org.springframework.amqp.core.QueueBuilder;
import org.springframework.amqp.rabbit.annotation.RabbitListener;
import org.springframework.amqp.rabbit.config.ContainerCustomizer;
import org.springframework.amqp.rabbit.config.SimpleRabbitListenerContainerFactory;
import org.springframework.amqp.rabbit.connection.ConnectionFactory;
import org.springframework.amqp.rabbit.core.RabbitTemplate;
import org.springframework.amqp.rabbit.listener.SimpleMessageListenerContainer;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Issue 37 (probeF; SPEC 15): the starter puts its advice first in every RabbitMQ container
 * factory's advice chain; a header key is read from what it binds, and a poison message is rejected
 * without requeue by it. An application that set the advice chain of each container (a {@code
 * ContainerCustomizer} bean, which Boot applies to its factory) replaced it: the listener never ran
 * and each message was requeued in a hot loop. The starter's advice is now put first again on each
 * container, before the application's: two messages of one key, the listener runs once, and the
 * application's advice still sees the deliveries. On the shared rabbitmq-server.
 */
@SpringBootTest(
    classes = RabbitContainerAdviceTest.App.class,
    // without the starter's advice a message was requeued at once, over and over: its stack
    // traces would fill the log
    properties = "logging.level.org.springframework.amqp.rabbit.listener=OFF")
@DirtiesContext
class RabbitContainerAdviceTest {

  static final String QUEUE = "idem.container-advice";

  static final List<String> advised = new CopyOnWriteArrayList<>();
  static final List<String> runs = new CopyOnWriteArrayList<>();

  public static class HeaderKeyedListener {
    @RabbitListener(id = "rabbit-container-advice", queues = QUEUE)
    @IdempotentListener(name = "rabbit-container-advice", header = "Idempotency-Key")
    public void onEvent(String event) {
      runs.add(event);
    }
  }

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  static class App {
    @Bean
    HeaderKeyedListener headerKeyedListener() {
      return new HeaderKeyedListener();
    }

    @Bean
    Declarables containerAdviceQueue() {
      return new Declarables(QueueBuilder.nonDurable(QUEUE).build());
    }

    /** The application's own advice on each container (logging, tracing, say). */
    @Bean
    ContainerCustomizer<SimpleMessageListenerContainer> ownAdvice() {
      MethodInterceptor mine =
          invocation -> {
            advised.add("delivery");
            return invocation.proceed();
          };
      return container -> container.setAdviceChain(mine);
    }
  }

  /**
   * A container factory whose class is final: the starter cannot observe the containers it creates,
   * so it cannot put its advice back after the factory's customizer replaced the chain.
   */
  static final class FinalFactory extends SimpleRabbitListenerContainerFactory {}

  public static class GuardedOnFinalFactory {
    @RabbitListener(
        id = "rabbit-advice-required",
        queues = QUEUE,
        containerFactory = "finalFactory",
        autoStartup = "false")
    @IdempotentListener(name = "rabbit-advice-required", header = "Idempotency-Key")
    public void onEvent(String event) {
      runs.add(event);
    }
  }

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  static class FinalFactoryApp {
    @Bean
    GuardedOnFinalFactory guardedOnFinalFactory() {
      return new GuardedOnFinalFactory();
    }

    @Bean
    FinalFactory finalFactory(ConnectionFactory connectionFactory) {
      FinalFactory factory = new FinalFactory();
      factory.setConnectionFactory(connectionFactory);
      MethodInterceptor mine = invocation -> invocation.proceed();
      factory.setContainerCustomizer(container -> container.setAdviceChain(mine));
      return factory;
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

  @Autowired RabbitTemplate template;

  @Test
  void aHeaderKeyedListenerRunsOnceBehindTheApplicationsOwnContainerAdvice() throws Exception {
    String payload = "event-" + UUID.randomUUID();
    String key = "order-" + UUID.randomUUID();
    String last = "last-" + UUID.randomUUID();
    send(payload, key);
    send(payload, key);
    send(last, "order-" + UUID.randomUUID());
    // one consumer, in order: the first two were handled once the last ran. Short: before the fix
    // the messages were requeued in a hot loop, which this bounds
    Poll.within(Duration.ofSeconds(15))
        .until("the last message's run", () -> List.copyOf(runs), done -> done.contains(last));
    assertThat(advised).as("the application's advice saw the deliveries").hasSize(3);
    assertThat(runs)
        .as("the header-keyed listener behind the application's own container advice")
        .containsExactly(payload, last);
  }

  @Test
  void aGuardedListenerWhoseContainerLostTheStartersAdviceFailsTheStart() {
    SpringApplication application = new SpringApplication(FinalFactoryApp.class);
    Map<String, Object> properties = new HashMap<>();
    properties.put("spring.rabbitmq.host", "127.0.0.1");
    properties.put("spring.rabbitmq.port", RabbitMqServer.shared().port());
    properties.put("spring.main.banner-mode", "off");
    application.setDefaultProperties(properties);
    assertThatThrownBy(() -> application.run().close()) // closed if it started after all
        .as("the start of a guarded listener whose container has no starter's advice")
        .hasStackTraceContaining("RabbitMQ listener container 'rabbit-advice-required'")
        .hasStackTraceContaining("the application replaced the advice chain")
        .hasStackTraceContaining("Keep the first element of the factory's advice chain");
  }

  private void send(String payload, String key) {
    Message message =
        MessageBuilder.withBody(payload.getBytes(java.nio.charset.StandardCharsets.UTF_8))
            .setContentType("text/plain")
            .setHeader("Idempotency-Key", key)
            .build();
    template.send("", QUEUE, message);
  }
}
