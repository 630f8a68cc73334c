package dev.idempotency.spring.messaging.rabbit;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.IdempotentListener.StoredFailure;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import dev.idempotency.spring.messaging.Sends.PermanentFailure;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.assertj.core.api.Assertions;
import org.assertj.core.api.SoftAssertions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.core.Declarables;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.rabbit.annotation.RabbitListener;
import org.springframework.amqp.rabbit.config.SimpleRabbitListenerContainerFactory;
import org.springframework.amqp.rabbit.connection.ConnectionFactory;
import org.springframework.amqp.rabbit.listener.RabbitListenerEndpointRegistry;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.test.annotation.DirtiesContext;

/**
 * Probe (probeS) of fixpoison (b5ba4f1), on the real rabbitmq-server: a header-keyed consumer-side
 * batch listener ({@code consumerBatchEnabled}, {@code AUTO} acknowledgement, queues with a
 * dead-letter exchange) whose batch Spring AMQP fails as a whole. fixpoison has the listener get
 * the batch's other messages before a poison message (no usable key) rejects the batch; a message
 * whose key failed permanently before, under {@code storedFailure = DEAD_LETTER}, also rejects the
 * batch without requeue. The promise (SPEC 1): each message with a new key is sent once, never
 * dead-lettered unsent; a message without a key, or of a key that failed permanently, is not sent.
 */
@SpringBootTest(
    classes = RabbitConsumerBatchStopProbeTest.App.class,
    properties = "logging.level.org.springframework.amqp.rabbit.listener=OFF")
@DirtiesContext
@Tag("extended") // about 50 s a Boot line
class RabbitConsumerBatchStopProbeTest extends RabbitProbeSupport {

  static final String POISON_QUEUE = "idem.probe-s.poison-consumer-batch";
  static final String STORED_QUEUE = "idem.probe-s.stored-failure-consumer-batch";
  static final String POISON_BATCH = "probe-s-poison-consumer-batch";
  static final String STORED_BATCH = "probe-s-stored-failure-consumer-batch";

  public static class Listeners {
    static final List<String> sent = new CopyOnWriteArrayList<>();

    @RabbitListener(
        id = POISON_BATCH,
        queues = POISON_QUEUE,
        containerFactory = "consumerBatchFactory",
        autoStartup = "false")
    @IdempotentListener(name = POISON_BATCH)
    public void poisonBatch(List<String> events) {
      sent.addAll(events);
    }

    @RabbitListener(
        id = STORED_BATCH,
        queues = STORED_QUEUE,
        containerFactory = "consumerBatchFactory",
        autoStartup = "false")
    @IdempotentListener(name = STORED_BATCH, storedFailure = StoredFailure.DEAD_LETTER)
    public void storedBatch(List<String> events) {
      sent.addAll(events);
    }
  }

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ListenerTestConfiguration.class)
  static class App {
    @Bean
    Listeners probeSListeners() {
      return new Listeners();
    }

    @Bean
    Declarables probeSQueues() {
      return deadLetteredQueues(POISON_QUEUE, STORED_QUEUE);
    }

    @Bean
    SimpleRabbitListenerContainerFactory consumerBatchFactory(ConnectionFactory connectionFactory) {
      return RabbitProbeSupport.consumerBatchFactory(connectionFactory);
    }
  }

  @Autowired RabbitListenerEndpointRegistry registry;
  @Autowired IdempotencyGuard guard;

  @Override
  List<String> sends() {
    return Listeners.sent;
  }

  /** A batch of two messages, neither with a key: both dead-lettered, unsent, no loop. */
  @Test
  void aBatchOfPoisonMessagesOnlyIsDeadLetteredWhole() throws Exception {
    String[] events = {unique("all-no-key-0"), unique("all-no-key-1")};
    plain.send("", POISON_QUEUE, withoutKey(events[0]));
    plain.send("", POISON_QUEUE, withoutKey(events[1]));
    List<String> deadLettered = runBatch(POISON_BATCH, POISON_QUEUE, events, "all");
    SoftAssertions.assertSoftly(
        softly -> {
          softly.assertThat(sentOf(events)).as("sends").containsExactly(0, 0);
          softly.assertThat(deadLettered).as("dead-lettered").contains(events);
        });
  }

  /** The poison message first: the two after it are sent once, none dead-lettered unsent. */
  @Test
  void aPoisonMessageFirstLeavesTheOthersSent() throws Exception {
    String[] events = {unique("first-no-key"), unique("first-1"), unique("first-2")};
    plain.send("", POISON_QUEUE, withoutKey(events[0]));
    plain.send("", POISON_QUEUE, message(events[1]));
    plain.send("", POISON_QUEUE, message(events[2]));
    List<String> deadLettered = runBatch(POISON_BATCH, POISON_QUEUE, events, "first");
    String facts = "dead-lettered: " + deadLettered + ", sent: " + sentOf(events);
    SoftAssertions.assertSoftly(
        softly -> {
          softly.assertThat(sent(events[0])).as("sends of the poison message").isZero();
          softly.assertThat(sent(events[1])).as("sends of message 1 (" + facts + ")").isEqualTo(1);
          softly.assertThat(sent(events[2])).as("sends of message 2 (" + facts + ")").isEqualTo(1);
          softly.assertThat(deadLettered).as("dead-lettered (" + facts + ")").contains(events[0]);
        });
  }

  /*
   * Was an open finding (probeS, on 5cfa0b8; medium, a lost send, only with storedFailure =
   * DEAD_LETTER: the messages after the one whose key failed permanently dead-lettered unsent,
   * dropped where the queue has no dead-letter exchange), fixed in ListenerBatches (where the whole
   * batch fails together, such a message rejects the batch once the others ran, as a poison
   * message does since b5ba4f1). Failed before on Boot 3.5: "sends of message 2 (dead-lettered:
   * [sf-0-..., sf-failed-..., sf-2-..., sf-3-...], sent: [1, 0, 0, 0]) expected: 1 but was: 0".
   */
  /**
   * Four messages in one batch, the second of a key that failed permanently before: the other three
   * are sent once; the second is dead-lettered unsent.
   */
  @Test
  void aStoredFailureToDeadLetterInABatchLeavesTheOthersSent() throws Exception {
    String[] events = {
      unique("sf-0"), unique("sf-failed"), unique("sf-2"), unique("sf-3"),
    };
    Assertions.assertThatThrownBy(
            () ->
                guard.execute(
                    IdempotencyKey.of(STORED_BATCH, "key-" + events[1]),
                    Duration.ofHours(1),
                    context -> {
                      throw new PermanentFailure(events[1]);
                    }))
        .isInstanceOf(PermanentFailure.class);
    for (String event : events) {
      plain.send("", STORED_QUEUE, message(event));
    }
    List<String> deadLettered = runBatch(STORED_BATCH, STORED_QUEUE, events, "sf");
    String facts = "dead-lettered: " + deadLettered + ", sent: " + sentOf(events);
    SoftAssertions.assertSoftly(
        softly -> {
          for (int i : new int[] {0, 2, 3}) {
            softly
                .assertThat(sent(events[i]))
                .as("sends of message " + i + " (" + facts + ")")
                .isEqualTo(1);
          }
          softly.assertThat(sent(events[1])).as("sends of the failed key's message").isZero();
          softly.assertThat(deadLettered).as("dead-lettered (" + facts + ")").contains(events[1]);
        });
  }

  /**
   * Starts the listener's container on the messages published to its queue (one consumer batch),
   * waits until each keyed one was sent or something was dead-lettered, then for a marker; returns
   * what was dead-lettered.
   */
  private List<String> runBatch(String listener, String queue, String[] events, String prefix)
      throws Exception {
    registry.getListenerContainer(listener).start();
    try {
      try {
        await(
            "the keyed messages sent, or something dead-lettered",
            () ->
                deadLetterCount(queue) > 0
                    || java.util.Arrays.stream(events)
                        .allMatch(
                            e -> sent(e) >= 1 || e.contains("no-key") || e.contains("failed")));
      } catch (AssertionError timedOut) {
        // the assertions say what happened
      }
      awaitMarker(queue, prefix);
      return drainQueue(queue + DEAD_LETTERS);
    } finally {
      registry.getListenerContainer(listener).stop();
    }
  }

  private List<Integer> sentOf(String[] events) {
    List<Integer> counts = new ArrayList<>();
    for (String event : events) {
      counts.add(sent(event));
    }
    return counts;
  }

  private long deadLetterCount(String queue) {
    Long count = plain.execute(channel -> channel.messageCount(queue + DEAD_LETTERS));
    return count == null ? 0 : count;
  }

  private List<String> drainQueue(String queue) {
    List<String> payloads = new ArrayList<>();
    for (Message m = plain.receive(queue, 500); m != null; m = plain.receive(queue, 500)) {
      payloads.add(new String(m.getBody(), StandardCharsets.UTF_8));
    }
    return payloads;
  }
}
