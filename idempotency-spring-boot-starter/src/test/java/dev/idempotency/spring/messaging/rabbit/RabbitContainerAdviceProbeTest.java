package dev.idempotency.spring.messaging.rabbit;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import dev.idempotency.testservers.RabbitMqServer;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.aopalliance.intercept.MethodInterceptor;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.core.Declarables;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.core.MessageBuilder;
import org.springframework.amqp.core.QueueBuilder;
import org.springframework.amqp.rabbit.annotation.RabbitListener;
import org.springframework.amqp.rabbit.config.ContainerCustomizer;
import org.springframework.amqp.rabbit.core.RabbitTemplate;
import org.springframework.amqp.rabbit.listener.SimpleMessageListenerContainer;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Probe (issue 37, probeF; SPEC 15): the starter puts its advice first in every RabbitMQ container
 * factory's advice chain ({@code ListenerContainerHooks}); a header key is read from what it binds,
 * and a poison message is rejected without requeue by it. An application that sets the advice chain
 * of each container (a {@code ContainerCustomizer} bean, which Boot applies to its factory)
 * replaces it. A header-keyed {@code @IdempotentListener} must still run once per key: two messages
 * of one key, the listener runs once.
 */
@Tag("open-finding")
@SpringBootTest(
    classes = RabbitContainerAdviceProbeTest.App.class,
    // a message that fails is requeued at once, over and over: its stack traces would fill the log
    properties = "logging.level.org.springframework.amqp.rabbit.listener=OFF")
@DirtiesContext
class RabbitContainerAdviceProbeTest {

  static final String QUEUE = "idem.probe-advice";

  static final List<String> advised = new CopyOnWriteArrayList<>();
  static final List<String> runs = new CopyOnWriteArrayList<>();

  public static class ProbeListener {
    @RabbitListener(id = "rabbit-probe-advice", queues = QUEUE)
    @IdempotentListener(name = "rabbit-probe-advice", header = "Idempotency-Key")
    public void onEvent(String event) {
      runs.add(event);
    }
  }

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  static class App {
    @Bean
    ProbeListener probeListener() {
      return new ProbeListener();
    }

    @Bean
    Declarables probeQueue() {
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
    for (int i = 0; i < 2; i++) {
      Message message =
          MessageBuilder.withBody(payload.getBytes(java.nio.charset.StandardCharsets.UTF_8))
              .setContentType("text/plain")
              .setHeader("Idempotency-Key", key)
              .build();
      template.send("", QUEUE, message);
    }
    long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (System.nanoTime() - until < 0 && runs.isEmpty()) {
      TimeUnit.MILLISECONDS.sleep(50); // bounded polling
    }
    assertThat(advised).as("the application's advice saw the deliveries").hasSizeGreaterThan(1);
    assertThat(runs)
        .as(
            "the header-keyed listener behind the application's own container advice (%s"
                + " deliveries of the two messages in 20 s)",
            advised.size())
        .containsExactly(payload);
  }
}
