package dev.idempotency.spring.messaging.rabbit;

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
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.core.Declarables;
import org.springframework.amqp.core.MessageBuilder;
import org.springframework.amqp.core.QueueBuilder;
import org.springframework.amqp.rabbit.annotation.RabbitListener;
import org.springframework.amqp.rabbit.config.ContainerCustomizer;
import org.springframework.amqp.rabbit.core.RabbitTemplate;
import org.springframework.amqp.rabbit.listener.ConditionalRejectingErrorHandler;
import org.springframework.amqp.rabbit.listener.SimpleMessageListenerContainer;
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
 * probeU (fixrabbit; SPEC 1, SPEC 15): the application sets the container's {@code ErrorHandler} to
 * Spring AMQP's {@code ConditionalRejectingErrorHandler} with a {@code FatalExceptionStrategy} that
 * treats every listener failure as fatal ("never requeue a failing message in a loop"). The
 * container calls it with the starter's {@code ImmediateRequeueAmqpException} (a deferral: the
 * store is down, nothing was sent), it wraps it in {@code AmqpRejectAndDontRequeueException}, and
 * {@code ContainerUtils.shouldRequeue} meets the reject first in the cause chain: the delivery is
 * rejected without requeue (dropped here, dead-lettered with a DLX) without its send. SPEC 15 and
 * RabbitDeliveryAdvice's Javadoc: a deferral "comes back and is never dead-lettered for that
 * reason", "whatever the container's retry or requeue settings". On the shared rabbitmq-server.
 *
 * <p>Severity medium (a lost send). Fails on main (dc550c5) on Boot 3.5 and 4.0: "timed out after
 * 30000 ms waiting for the deferred delivery's run (runs [marker-...], judged fatal by the error
 * handler 1 times)".
 */
@SpringBootTest(classes = RabbitContainerErrorHandlerProbeTest.App.class)
@DirtiesContext
class RabbitContainerErrorHandlerProbeTest {

  static final String QUEUE = "idem.container-error-handler";

  static final List<String> runs = new CopyOnWriteArrayList<>();
  static final AtomicInteger judgedFatal = new AtomicInteger();

  public static class KeyedListener {
    @RabbitListener(id = "rabbit-container-error-handler", queues = QUEUE)
    @IdempotentListener(name = "rabbit-container-error-handler", key = "#event")
    public void onEvent(String event) {
      runs.add(event);
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
    Declarables containerErrorHandlerQueues() {
      return new Declarables(QueueBuilder.nonDurable(QUEUE).build());
    }

    @Bean
    ContainerCustomizer<SimpleMessageListenerContainer> everyFailureIsFatal() {
      return container -> {
        container.setReceiveTimeout(100L);
        container.setErrorHandler(
            new ConditionalRejectingErrorHandler(
                t -> {
                  judgedFatal.incrementAndGet();
                  return true;
                }));
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

  @Tag("open-finding")
  @Test
  void aDeferralIsNotRejectedByTheContainersErrorHandler() throws Exception {
    String event = "event-" + UUID.randomUUID();
    String marker = "marker-" + UUID.randomUUID();
    int refusedBefore = store.refused.get();
    int fatalBefore = judgedFatal.get();
    store.down.set(true);
    try {
      send(event);
      Poll.within(Duration.ofSeconds(60))
          .until(
              "the delivery refused while the store is down, and seen by the error handler",
              () -> store.refused.get() > refusedBefore && judgedFatal.get() > fatalBefore,
              done -> done);
    } finally {
      store.down.set(false);
    }
    send(marker);
    Poll.within(Duration.ofSeconds(30))
        .until("the marker's run", () -> List.copyOf(runs), done -> done.contains(marker));
    Poll.within(Duration.ofSeconds(30))
        .until(
            "the deferred delivery's run (runs "
                + runs
                + ", judged fatal by the error handler "
                + judgedFatal.get()
                + " times)",
            () -> List.copyOf(runs),
            done -> done.contains(event));
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
