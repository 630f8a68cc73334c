package dev.idempotency.spring.messaging.rabbit;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import dev.idempotency.testservers.Poll;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import org.aopalliance.aop.Advice;
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
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * What the RabbitMQ deferral tests share (SPEC 15 behind an application's retry or error handler):
 * the broker and listener properties; the application ({@link Application}: auto-configuration, the
 * messaging tests' beans, the test's queue and its dead-letter queue; {@link KeyedApplication} adds
 * a listener keyed by the payload); the store switch, sends, dead-letter reads and the bounded
 * waits. A subclass names its queue with the property {@link #QUEUE_PROPERTY} (its dead-letter
 * queue is the name and {@code .dlq}) and its application, which imports one of the two. The
 * listeners add each payload they run to {@link #runs} ({@link #run}), and a payload starting with
 * {@code fail-} fails its send.
 */
@DirtiesContext
abstract class RabbitDeferralFixture {

  /** The property that names the test's queue. */
  static final String QUEUE_PROPERTY = "idem.test.queue";

  /** The payloads the listeners ran, in order; payloads are unique, so the classes share it. */
  static final List<String> runs = new CopyOnWriteArrayList<>();

  @DynamicPropertySource
  static void rabbit(DynamicPropertyRegistry registry) {
    RabbitTestProperties.register(registry);
  }

  /**
   * The test application's base: auto-configuration, the messaging tests' beans, the test's queue
   * and its dead-letter queue.
   */
  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ListenerTestConfiguration.class)
  static class Application {
    @Bean
    Declarables testQueues(@Value("${" + QUEUE_PROPERTY + "}") String queue) {
      return queues(queue);
    }
  }

  /** {@link Application} with {@link KeyedListener} on the test's queue. */
  @Configuration(proxyBeanMethods = false)
  @Import(Application.class)
  static class KeyedApplication {
    @Bean
    KeyedListener keyedListener() {
      return new KeyedListener();
    }
  }

  /** Runs each message of the test's queue, keyed by its payload. */
  public static class KeyedListener {
    @RabbitListener(id = "rabbit-deferral-keyed", queues = "${" + QUEUE_PROPERTY + "}")
    @IdempotentListener(name = "rabbit-deferral-keyed", key = "#event")
    public void onEvent(String event) {
      run(event);
    }
  }

  /** A queue and its dead-letter queue ({@link #deadLetterQueue}), neither durable. */
  static Declarables queues(String queue) {
    return new Declarables(
        QueueBuilder.nonDurable(queue).build(),
        QueueBuilder.nonDurable(deadLetterQueue(queue)).build());
  }

  /** The dead-letter queue of {@code queue}. */
  static String deadLetterQueue(String queue) {
    return queue + ".dlq";
  }

  /**
   * Containers that stop within 100 ms, whose advice chain is the application's {@code retry} (a
   * short backoff) with a recoverer that republishes an exhausted delivery to the dead-letter queue
   * of {@code queue}.
   */
  static ContainerCustomizer<SimpleMessageListenerContainer> retryingContainers(
      RetryInterceptorBuilder<?, ?> retry, RabbitTemplate template, String queue) {
    Advice advice =
        retry
            .backOffOptions(20, 2.0, 100)
            .recoverer(new RepublishMessageRecoverer(template, "", deadLetterQueue(queue)))
            .build();
    return container -> {
      container.setReceiveTimeout(100L);
      container.setAdviceChain(advice);
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

  /** The queue the test sends to: the test's queue, unless the test names another. */
  @Value("${" + QUEUE_PROPERTY + "}")
  String queue;

  /** The message for a payload; a stateful retry needs a message id. */
  Message message(String payload) {
    return MessageBuilder.withBody(payload.getBytes(StandardCharsets.UTF_8))
        .setContentType("text/plain")
        .build();
  }

  void send(String payload) {
    template.send("", queue, message(payload));
  }

  /**
   * Sends a payload while the store is down and asserts it was not dead-lettered ({@link
   * #assertDeferredWhileDownNotDeadLettered}); once the store answers, sends a marker and waits
   * until both ran; asserts the payload ran once.
   *
   * @return the payload
   */
  String assertDeferredThenSentOnce() throws Exception {
    String event = "event-" + UUID.randomUUID();
    String marker = "marker-" + UUID.randomUUID();
    assertDeferredWhileDownNotDeadLettered(event);
    send(marker);
    awaitRuns(event, marker);
    assertThat(runs.stream().filter(event::equals).count()).as("sends of the event").isEqualTo(1);
    return event;
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

  /**
   * Sends a payload whose send fails (the store answers) and waits until the payloads the
   * application's error handler was called for ({@code handled}) include it.
   */
  void assertFailedSendHandledBy(String handler, Poll.Probe<List<String>> handled)
      throws Exception {
    String failing = "fail-" + UUID.randomUUID();
    send(failing);
    Poll.within(Duration.ofSeconds(30))
        .until("the failed send handled by " + handler, handled, done -> done.contains(failing));
  }

  private void drainDeadLetters(List<String> into) {
    String dlq = deadLetterQueue(queue);
    for (Message m = template.receive(dlq); m != null; m = template.receive(dlq)) {
      into.add(new String(m.getBody(), StandardCharsets.UTF_8));
    }
  }
}
