package dev.idempotency.spring.suite;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.spring.messaging.Events;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import dev.idempotency.testservers.RabbitMqServer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.rabbit.core.RabbitAdmin;
import org.springframework.amqp.rabbit.core.RabbitTemplate;
import org.springframework.amqp.rabbit.listener.RabbitListenerEndpointRegistry;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * A {@link SuiteRabbitApplication} on the shared RabbitMQ server: published to with its {@code
 * RabbitTemplate}, acknowledged once its queue holds nothing (ready or unacknowledged), its dead
 * letters drained from {@code <queue>.dlq}.
 */
final class RabbitListenerApplication implements ListenerApplication {

  private final ConfigurableApplicationContext context;
  private final String queue;
  private final List<String> deadLetters = new CopyOnWriteArrayList<>();

  private RabbitListenerApplication(ConfigurableApplicationContext context, String queue) {
    this.context = context;
    this.queue = queue;
  }

  static RabbitListenerApplication start(
      SwitchableKeyStore store, SuiteProvider provider, CountDownLatch closing, String queue) {
    return start(store, provider, closing, queue, false);
  }

  /** The application with its listener as an {@code @Idempotent} listener method. */
  static RabbitListenerApplication idempotentMethod(
      SwitchableKeyStore store, SuiteProvider provider, CountDownLatch closing, String queue) {
    return start(store, provider, closing, queue, true);
  }

  /** The application with {@code extraProperties} set last (probes). */
  static RabbitListenerApplication start(
      SwitchableKeyStore store,
      SuiteProvider provider,
      CountDownLatch closing,
      String queue,
      boolean idempotentMethod,
      String... extraProperties) {
    ConfigurableApplicationContext context =
        SuiteApplications.application(SuiteRabbitApplication.class, store, provider, closing)
            .defaultProperties(
                SuiteApplications.listenerProperties(
                    new String[] {
                      "spring.rabbitmq.host=127.0.0.1",
                      "spring.rabbitmq.port=" + RabbitMqServer.shared().port(),
                      "suite.destination=" + queue,
                      "suite.rabbit.idempotent-method=" + idempotentMethod
                    },
                    extraProperties))
            .run();
    return new RabbitListenerApplication(context, queue);
  }

  @Override
  public void publish(String key, String payload) {
    context
        .getBean(RabbitTemplate.class)
        .convertAndSend(
            "",
            queue,
            payload,
            message -> {
              message.getMessageProperties().setHeader("Idempotency-Key", key);
              return message;
            });
  }

  /** Drains the dead-letter queue into what this application has seen of it. */
  @Override
  public synchronized List<String> deadLettered() {
    RabbitTemplate template = context.getBean(RabbitTemplate.class);
    Message message;
    while ((message = template.receive(queue + ".dlq")) != null) {
      deadLetters.add(new String(message.getBody(), StandardCharsets.UTF_8));
    }
    return Collections.unmodifiableList(new ArrayList<>(deadLetters));
  }

  /**
   * The queue is empty, and stays empty once the consumer stops (a message delivered and not yet
   * acknowledged would be back in it).
   */
  @Override
  public void awaitAcknowledged() throws Exception {
    RabbitAdmin admin = context.getBean(RabbitAdmin.class);
    Waits.await("an empty queue", () -> admin.getQueueInfo(queue).getMessageCount() == 0);
    var container =
        context
            .getBean(RabbitListenerEndpointRegistry.class)
            .getListenerContainer(SuiteRabbitApplication.LISTENER);
    container.stop();
    try {
      if (admin.getQueueInfo(queue).getMessageCount() != 0) {
        throw new AssertionError("messages left in " + queue + " once the consumer stopped");
      }
    } finally {
      container.start();
    }
  }

  @Override
  public Events events() {
    return context.getBean(Events.class);
  }

  @Override
  public IdempotencyGuard guard() {
    return context.getBean(IdempotencyGuard.class);
  }

  @Override
  public void close() {
    context.close();
  }
}
