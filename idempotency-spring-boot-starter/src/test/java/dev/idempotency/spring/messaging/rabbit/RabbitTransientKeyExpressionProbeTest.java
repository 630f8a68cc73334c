package dev.idempotency.spring.messaging.rabbit;

import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.assertj.core.api.SoftAssertions;
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
 * Probe (probeQ), on the real rabbitmq-server, of fixpoison (b5ba4f1, merged in dd6498c): a key
 * expression that fails for a message now makes it a poison message ({@code
 * InvalidIdempotencyKeyException}, the failure as its cause), rejected without requeue. {@code
 * ListenerMethod.evaluate} turns every {@code RuntimeException} of the evaluation into that,
 * assuming it is "the same at every redelivery". A key expression may call code whose failure is
 * transient: here {@code T(...Keys).of(#payload)}, a key look-up that fails once for a message (as
 * a lookup service's timeout does), then answers. The promise (SPEC 1: no lost send): that message
 * is sent once, as it would be had the look-up answered the first time.
 *
 * <ul>
 *   <li>a record listener keyed by that expression gets the message alone;
 *   <li>a consumer-side batch listener keyed by it gets a batch of three, the second's look-up
 *       failing once;
 *   <li>the same batch listener gets a batch of three whose second's look-up keeps failing until
 *       the test lets it answer (fixbidx).
 * </ul>
 */
@SpringBootTest(
    classes = RabbitTransientKeyExpressionProbeTest.App.class,
    properties = "logging.level.org.springframework.amqp.rabbit.listener=OFF")
@DirtiesContext
class RabbitTransientKeyExpressionProbeTest extends RabbitProbeSupport {

  static final String RECORD_QUEUE = "idem.probe-q.transient-key-record";
  static final String BATCH_QUEUE = "idem.probe-q.transient-key-batch";
  static final String RECORD = "probe-q-transient-key-record";
  static final String BATCH = "probe-q-transient-key-batch";

  /** A key computed by code that may fail transiently (a look-up). */
  static final String KEY =
      "T(dev.idempotency.spring.messaging.rabbit.RabbitTransientKeyExpressionProbeTest$Keys)"
          + ".of(#payload)";

  /**
   * The key look-up: fails the first time it is asked for a payload holding "flaky", and every time
   * for a payload in {@link #blocked}.
   */
  public static final class Keys {
    static final Set<String> failedOnce = ConcurrentHashMap.newKeySet();
    static final Set<String> blocked = ConcurrentHashMap.newKeySet();
    static final Map<String, AtomicInteger> tries = new ConcurrentHashMap<>();

    private Keys() {}

    public static String of(String payload) {
      tries.computeIfAbsent(payload, p -> new AtomicInteger()).incrementAndGet();
      if (payload.contains("flaky") && failedOnce.add(payload)) {
        throw new IllegalStateException("key look-up timed out (transient)");
      }
      if (blocked.contains(payload)) {
        throw new IllegalStateException("key look-up timed out (still)");
      }
      return "key-" + payload;
    }

    static int tries(String payload) {
      AtomicInteger count = tries.get(payload);
      return count == null ? 0 : count.get();
    }
  }

  public static class Listeners {
    static final List<String> sent = new CopyOnWriteArrayList<>();

    @RabbitListener(id = RECORD, queues = RECORD_QUEUE, containerFactory = "recordFactory")
    @IdempotentListener(name = RECORD, key = KEY)
    public void record(String event) {
      sent.add(event);
    }

    @RabbitListener(
        id = BATCH,
        queues = BATCH_QUEUE,
        containerFactory = "consumerBatchFactory",
        autoStartup = "false")
    @IdempotentListener(name = BATCH, key = KEY)
    public void batch(List<String> events) {
      sent.addAll(events);
    }
  }

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ListenerTestConfiguration.class)
  static class App {
    @Bean
    Listeners probeQListeners() {
      return new Listeners();
    }

    @Bean
    Declarables probeQQueues() {
      return deadLetteredQueues(RECORD_QUEUE, BATCH_QUEUE);
    }

    @Bean
    SimpleRabbitListenerContainerFactory consumerBatchFactory(ConnectionFactory connectionFactory) {
      return RabbitProbeSupport.consumerBatchFactory(connectionFactory);
    }

    @Bean
    SimpleRabbitListenerContainerFactory recordFactory(ConnectionFactory connectionFactory) {
      SimpleRabbitListenerContainerFactory factory = new SimpleRabbitListenerContainerFactory();
      factory.setConnectionFactory(connectionFactory);
      factory.setReceiveTimeout(100L);
      return factory;
    }
  }

  @Autowired RabbitListenerEndpointRegistry registry;

  @Override
  List<String> sends() {
    return Listeners.sent;
  }

  /*
   * Was an open finding, fixed by fixpoison2 (only SpEL's own evaluation errors make a poison
   * message; a method the expression calls that throws is retried). It read: (probeQ, on dd6498c;
   * medium: a lost send, the message dead-lettered unsent, dropped
   * where the queue has no dead-letter exchange; an operator's re-drive sends it). Fails on Boot
   * 3.5 and 4.0 alike: "sends of the message whose key look-up failed once (dead-lettered:
   * [rt-flaky-...]) expected: 1 but was: 0". ListenerMethod.evaluate makes any RuntimeException
   * of the evaluation an InvalidIdempotencyKeyException (a poison message), a transient one too.
   */
  @Test
  void aKeyLookUpThatFailsOnceOnARecordListenerStillSendsTheMessage() throws Exception {
    String event = unique("rt-flaky");
    plain.convertAndSend("", RECORD_QUEUE, event);
    awaitOrGoOn(
        "the message sent, or dead-lettered",
        () -> sent(event) >= 1 || deadLetterCount(RECORD_QUEUE) > 0);
    awaitMarker(RECORD_QUEUE, "rt");
    List<String> deadLettered = drainQueue(RECORD_QUEUE + DEAD_LETTERS);
    org.assertj.core.api.Assertions.assertThat(sent(event))
        .as("sends of the message whose key look-up failed once (dead-lettered: %s)", deadLettered)
        .isEqualTo(1);
  }

  /*
   * Was an open finding, fixed by fixpoison2 (only SpEL's own evaluation errors make a poison
   * message; a method the expression calls that throws is retried). It read: (probeQ, on dd6498c;
   * medium, as the record listener's above): the batch's other
   * two are sent, then the batch is rejected for the second, which is dead-lettered unsent. Fails
   * on Boot 3.5 and 4.0 alike: "sends of message 1, whose key look-up failed once (dead-lettered:
   * [bt-0-..., bt-flaky-..., bt-2-...], sent: [1, 0, 1]) expected: 1 but was: 0".
   */
  @Test
  void aKeyLookUpThatFailsOnceInAConsumerBatchStillSendsTheMessage() throws Exception {
    String[] events = {unique("bt-0"), unique("bt-flaky"), unique("bt-2")};
    for (String event : events) {
      plain.convertAndSend("", BATCH_QUEUE, event);
    }
    registry.getListenerContainer(BATCH).start();
    List<String> deadLettered = new ArrayList<>();
    try {
      awaitOrGoOn(
          "the three sent, or something dead-lettered",
          () ->
              (sent(events[0]) >= 1 && sent(events[1]) >= 1 && sent(events[2]) >= 1)
                  || deadLetterCount(BATCH_QUEUE) > 0);
      awaitMarker(BATCH_QUEUE, "bt");
    } finally {
      registry.getListenerContainer(BATCH).stop();
      deadLettered.addAll(drainQueue(BATCH_QUEUE + DEAD_LETTERS));
    }
    List<Integer> counts = new ArrayList<>();
    for (String event : events) {
      counts.add(sent(event));
    }
    String facts = "dead-lettered: " + deadLettered + ", sent: " + counts;
    SoftAssertions.assertSoftly(
        softly -> {
          softly.assertThat(sent(events[0])).as("sends of message 0 (" + facts + ")").isEqualTo(1);
          softly
              .assertThat(sent(events[1]))
              .as("sends of message 1, whose key look-up failed once (" + facts + ")")
              .isEqualTo(1);
          softly.assertThat(sent(events[2])).as("sends of message 2 (" + facts + ")").isEqualTo(1);
        });
  }

  /*
   * Failed before fixbidx (Boot 3.5): the batch failed for message 1's look-up before anything was
   * claimed, and Boot's default container requeued it whole, again and again: messages 0 and 2
   * were not sent while it failed (a retry interceptor's recoverer, or a container that does not
   * requeue, dead-letters them unsent): "sends while message 1's look-up failed (sent while
   * message 1's look-up failed: [0, 0, 0], its look-ups: 4, dead-lettered: []) expected [1, 0, 1]".
   */
  /**
   * A consumer batch [0, 1, 2] whose message 1's look-up keeps failing (the called code's failure,
   * retried as a record listener's would be): messages 0 and 2 are sent once at the first delivery;
   * the batch, which Spring AMQP fails as a whole, then goes to the container with message 1's
   * failure (Boot's default container requeues it: a replay of 0 and 2 at each redelivery); once
   * the look-up answers, message 1 is sent once. Nothing dead-lettered.
   */
  @Test
  void aKeyLookUpThatKeepsFailingInAConsumerBatchLeavesTheOthersSent() throws Exception {
    String[] events = {unique("bb-0"), unique("bb-blocked"), unique("bb-2")};
    Keys.blocked.add(events[1]);
    for (String event : events) {
      plain.convertAndSend("", BATCH_QUEUE, event);
    }
    registry.getListenerContainer(BATCH).start();
    List<Integer> whileBlocked;
    List<String> deadLettered = new ArrayList<>();
    try {
      // the first delivery sends 0 and 2, if at all; the batch comes back for message 1
      await("message 1's look-up tried 3 times", () -> Keys.tries(events[1]) >= 3);
      whileBlocked = sentOf(events);
      Keys.blocked.remove(events[1]);
      awaitOrGoOn(
          "the three sent, or something dead-lettered",
          () ->
              (sent(events[0]) >= 1 && sent(events[1]) >= 1 && sent(events[2]) >= 1)
                  || deadLetterCount(BATCH_QUEUE) > 0);
      awaitMarker(BATCH_QUEUE, "bb");
    } finally {
      Keys.blocked.remove(events[1]);
      registry.getListenerContainer(BATCH).stop();
      deadLettered.addAll(drainQueue(BATCH_QUEUE + DEAD_LETTERS));
    }
    String facts =
        "sent while message 1's look-up failed: "
            + whileBlocked
            + ", its look-ups: "
            + Keys.tries(events[1])
            + ", dead-lettered: "
            + deadLettered;
    SoftAssertions.assertSoftly(
        softly -> {
          softly
              .assertThat(whileBlocked)
              .as("sends while message 1's look-up failed (" + facts + ")")
              .containsExactly(1, 0, 1);
          softly.assertThat(sentOf(events)).as("sends (" + facts + ")").containsExactly(1, 1, 1);
          softly.assertThat(deadLettered).as("dead-lettered").isEmpty();
        });
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
      payloads.add(new String(m.getBody(), java.nio.charset.StandardCharsets.UTF_8));
    }
    return payloads;
  }

  private static void awaitOrGoOn(String what, java.util.function.BooleanSupplier condition)
      throws InterruptedException {
    try {
      await(what, condition);
    } catch (AssertionError timedOut) {
      // the assertions say what happened
    }
  }
}
