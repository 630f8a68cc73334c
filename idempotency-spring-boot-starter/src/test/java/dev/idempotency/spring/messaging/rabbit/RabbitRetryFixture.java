package dev.idempotency.spring.messaging.rabbit;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.SwitchableKeyStore;
import dev.idempotency.testservers.Poll;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.aopalliance.aop.Advice;
import org.springframework.amqp.core.Declarables;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.core.MessageBuilder;
import org.springframework.amqp.core.QueueBuilder;
import org.springframework.amqp.rabbit.config.ContainerCustomizer;
import org.springframework.amqp.rabbit.core.RabbitTemplate;
import org.springframework.amqp.rabbit.listener.SimpleMessageListenerContainer;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * What the RabbitMQ retry tests share (SPEC 15 behind an application's retry): the broker and
 * listener properties, a queue with its dead-letter queue, the store switch, sends, dead-letter
 * reads and the bounded waits. A subclass names its queues and its application; its listener adds
 * each payload it runs to {@link #runs}, and a payload starting with {@code fail-} fails its send.
 */
abstract class RabbitRetryFixture {

  /** The payloads the listeners ran, in order; payloads are unique, so the classes share it. */
  static final List<String> runs = new CopyOnWriteArrayList<>();

  @DynamicPropertySource
  static void rabbit(DynamicPropertyRegistry registry) {
    RabbitTestProperties.register(registry);
  }

  /** The listener's queue and its dead-letter queue, neither durable. */
  static Declarables queues(String queue, String dlq) {
    return new Declarables(
        QueueBuilder.nonDurable(queue).build(), QueueBuilder.nonDurable(dlq).build());
  }

  /** Containers that stop within 100 ms, with the application's advice chain. */
  static ContainerCustomizer<SimpleMessageListenerContainer> quickStopWith(Advice retry) {
    return container -> {
      container.setReceiveTimeout(100L);
      container.setAdviceChain(retry);
    };
  }

  /** Fails the listener's send when the payload says so. */
  static void run(String event) {
    runs.add(event);
    if (event.startsWith("fail-")) {
      throw new IllegalStateException("the send failed (test)");
    }
  }

  @Autowired RabbitTemplate template;
  @Autowired SwitchableKeyStore store;

  abstract String queue();

  abstract String deadLetterQueue();

  /** The message for a payload; a stateful retry needs a message id. */
  Message message(String payload) {
    return MessageBuilder.withBody(payload.getBytes(StandardCharsets.UTF_8))
        .setContentType("text/plain")
        .build();
  }

  void send(String payload) {
    template.send("", queue(), message(payload));
  }

  /**
   * Sends the payloads while the store is down, and keeps it down until a message is dead-lettered,
   * or until 20 more claims were refused (the delivery was plainly requeued and redelivered rather
   * than dead-lettered); asserts nothing was dead-lettered.
   */
  void assertDeferredWhileDownNotDeadLettered(String... payloads) throws Exception {
    List<String> deadLettered = new CopyOnWriteArrayList<>();
    int refusedBefore = store.refused.get();
    store.down.set(true);
    try {
      for (String payload : payloads) {
        send(payload);
      }
      Poll.within(Duration.ofSeconds(60))
          .until(
              "a message dead-lettered, or 20 claims refused",
              () -> {
                drainDeadLetters(deadLettered);
                return !deadLettered.isEmpty() || store.refused.get() >= refusedBefore + 20;
              },
              done -> done);
    } finally {
      store.down.set(false);
    }
    assertThat(deadLettered)
        .as(
            "deferred messages in the dead-letter queue (refused claims: %s)",
            store.refused.get() - refusedBefore)
        .isEmpty();
  }

  /** Waits until each payload has run (the guard may refuse at once a little longer). */
  void awaitRuns(String... payloads) throws Exception {
    Poll.within(Duration.ofSeconds(30))
        .until(
            "the runs of " + List.of(payloads),
            () -> List.copyOf(runs),
            done -> done.containsAll(List.of(payloads)));
  }

  /**
   * Sends a payload whose send fails (the store answers), waits until the application's recoverer
   * dead-letters it, and asserts the retry ran the listener again before that.
   */
  void assertFailedSendRetriedThenDeadLettered(String failing) throws Exception {
    List<String> deadLettered = new CopyOnWriteArrayList<>();
    send(failing);
    Poll.within(Duration.ofSeconds(60))
        .until(
            "the failed delivery dead-lettered by the application's recoverer",
            () -> {
              drainDeadLetters(deadLettered);
              return deadLettered.contains(failing);
            },
            done -> done);
    assertThat(runs.stream().filter(failing::equals).count())
        .as("runs of the failing delivery: the first and the retry's")
        .isGreaterThanOrEqualTo(2);
  }

  private void drainDeadLetters(List<String> into) {
    String dlq = deadLetterQueue();
    for (Message m = template.receive(dlq); m != null; m = template.receive(dlq)) {
      into.add(new String(m.getBody(), StandardCharsets.UTF_8));
    }
  }
}
