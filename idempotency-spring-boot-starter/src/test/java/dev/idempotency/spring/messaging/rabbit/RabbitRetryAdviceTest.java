package dev.idempotency.spring.messaging.rabbit;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import dev.idempotency.testservers.Poll;
import dev.idempotency.testservers.RabbitMqServer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.core.Declarables;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.core.MessageBuilder;
import org.springframework.amqp.core.QueueBuilder;
import org.springframework.amqp.rabbit.annotation.RabbitListener;
import org.springframework.amqp.rabbit.config.ContainerCustomizer;
import org.springframework.amqp.rabbit.config.RetryInterceptorBuilder;
import org.springframework.amqp.rabbit.core.RabbitTemplate;
import org.springframework.amqp.rabbit.listener.SimpleMessageListenerContainer;
import org.springframework.amqp.rabbit.retry.RepublishMessageRecoverer;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * probeS (fixcustom; SPEC 15): an application's {@code ContainerCustomizer} sets the container's
 * advice chain to Spring AMQP's stateless retry with a {@code RepublishMessageRecoverer} (the
 * dead-letter pattern of the Spring AMQP reference). The starter puts its advice first, the
 * application's after it ({@code RabbitDeliveryAdvice.includeIn}), so the retry runs inside the
 * starter's advice: a deferred delivery (here the store is down: nothing was sent) is retried by
 * the retry (three or four attempts), then the recoverer republishes it to the dead-letter queue
 * and returns, and the starter's advice sees a delivery that succeeded: the message is acknowledged
 * without its send. SPEC 15 and RabbitDeliveryAdvice's Javadoc: a deferred delivery "comes back and
 * is never dead-lettered for that reason", "whatever the container's retry or requeue settings". On
 * the shared rabbitmq-server.
 *
 * <p>Fixed (fixrabbit): the starter's deferral catcher is last in the chain, inside the retry, and
 * hands a deferral past it to the first part, which requeues it.
 */
@SpringBootTest(classes = RabbitRetryAdviceProbeTest.App.class)
@DirtiesContext
class RabbitRetryAdviceProbeTest {

  static final String QUEUE = "idem.retry-advice";
  static final String DLQ = "idem.retry-advice.dlq";

  static final List<String> runs = new CopyOnWriteArrayList<>();

  public static class KeyedListener {
    @RabbitListener(id = "rabbit-retry-advice", queues = QUEUE)
    @IdempotentListener(name = "rabbit-retry-advice", key = "#event")
    public void onEvent(String event) {
      runs.add(event);
      if (event.startsWith("fail-")) {
        throw new IllegalStateException("the send failed (test)");
      }
    }
  }

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ListenerTestConfiguration.class)
  static class App {
    @Bean
    KeyedListener keyedListener() {
      return new KeyedListener();
    }

    @Bean
    Declarables retryAdviceQueues() {
      return new Declarables(
          QueueBuilder.nonDurable(QUEUE).build(), QueueBuilder.nonDurable(DLQ).build());
    }

    /**
     * Retry each delivery in the consumer (the default attempts: three on Spring AMQP 3.2, four on
     * 4.0), then republish it to the DLQ.
     */
    @Bean
    ContainerCustomizer<SimpleMessageListenerContainer> retryThenDeadLetter(
        RabbitTemplate template) {
      return container -> {
        container.setReceiveTimeout(100L);
        container.setAdviceChain(
            RetryInterceptorBuilder.stateless()
                .backOffOptions(20, 2.0, 100)
                .recoverer(new RepublishMessageRecoverer(template, "", DLQ))
                .build());
      };
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
  @Autowired SwitchableKeyStore store;

  @Test
  void aDeliveryDeferredWhileTheStoreIsDownIsNotDeadLetteredByTheApplicationsRetryAdvice()
      throws Exception {
    String event = "event-" + UUID.randomUUID();
    String marker = "marker-" + UUID.randomUUID();
    List<String> deadLettered = new CopyOnWriteArrayList<>();
    store.down.set(true);
    try {
      send(event);
      // the store stays down until the delivery is dead-lettered, or has been refused so often
      // (20 claims) that it was plainly requeued and redelivered rather than dead-lettered
      Poll.within(Duration.ofSeconds(60))
          .until(
              "the delivery dead-lettered, or refused 20 times",
              () -> {
                for (Message m = template.receive(DLQ); m != null; m = template.receive(DLQ)) {
                  deadLettered.add(new String(m.getBody(), StandardCharsets.UTF_8));
                }
                return !deadLettered.isEmpty() || store.refused.get() >= 20;
              },
              done -> done);
    } finally {
      store.down.set(false);
    }
    assertThat(deadLettered)
        .as(
            "deferred deliveries in the dead-letter queue (refused claims: %s)",
            store.refused.get())
        .isEmpty();
    // the store answers again (the guard may refuse at once a little longer): both run
    send(marker);
    Poll.within(Duration.ofSeconds(30))
        .until(
            "the deferred delivery's and the marker's runs",
            () -> List.copyOf(runs),
            done -> done.contains(event) && done.contains(marker));
  }

  /**
   * The other side of the rule: a listener's own failure (a send that failed; the store answers)
   * still goes through the application's retry, which runs the listener again, and then its
   * recoverer, which dead-letters it as the application configured.
   */
  @Test
  void aFailedSendStillGoesThroughTheApplicationsRetryAndRecoverer() throws Exception {
    String failing = "fail-" + UUID.randomUUID();
    List<String> deadLettered = new CopyOnWriteArrayList<>();
    send(failing);
    Poll.within(Duration.ofSeconds(60))
        .until(
            "the failed delivery dead-lettered by the application's recoverer",
            () -> {
              for (Message m = template.receive(DLQ); m != null; m = template.receive(DLQ)) {
                deadLettered.add(new String(m.getBody(), StandardCharsets.UTF_8));
              }
              return deadLettered.contains(failing);
            },
            done -> done);
    assertThat(runs.stream().filter(failing::equals).count())
        .as("runs of the failing delivery: the first and the retry's")
        .isGreaterThanOrEqualTo(2);
  }

  private void send(String payload) {
    template.send(
        "",
        QUEUE,
        MessageBuilder.withBody(payload.getBytes(StandardCharsets.UTF_8))
            .setContentType("text/plain")
            .build());
  }
}
