package dev.idempotency.spring.messaging.rabbit;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.aopalliance.intercept.MethodInterceptor;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.core.Declarables;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.rabbit.annotation.RabbitListener;
import org.springframework.amqp.rabbit.config.SimpleRabbitListenerContainerFactory;
import org.springframework.amqp.rabbit.connection.ConnectionFactory;
import org.springframework.amqp.rabbit.listener.SimpleMessageListenerContainer;
import org.springframework.aop.support.DefaultPointcutAdvisor;
import org.springframework.aop.support.StaticMethodMatcherPointcut;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.config.BeanDefinition;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.context.annotation.Role;
import org.springframework.core.Ordered;
import org.springframework.test.annotation.DirtiesContext;

/**
 * probeH, on a real RabbitMQ broker: attempts to break SPEC 1 on what fixrabbit (43f6ece7) changed
 * in the Rabbit consumer support: the producer-batch marker bound to its delivery ({@code
 * idempotency_producerBatchDelivery}, the consumer and delivery tags) and the refusal kept for the
 * delivery when an application advice on the listener bean drops it.
 *
 * <ul>
 *   <li>a plain message whose copied marker headers name a delivery that its own delivery happens
 *       to be: the value is the consumer tag and delivery tag, and with a fixed consumer tag (an
 *       application's {@code ConsumerTagStrategy}) the first delivery of a channel is always {@code
 *       <tag>#1};
 *   <li>a deferral (the store down, nothing sent) thrown by the guard inside the listener bean's
 *       proxy, where an application advice ordered before the guard drops what the listener throws
 *       (the gap the fixer named: only a part's refusal was kept, not a deferral; the guard now
 *       keeps the deferral for the delivery too).
 * </ul>
 */
@SpringBootTest(
    classes = RabbitFixrabbitProbeTest.App.class,
    properties = "logging.level.org.springframework.amqp.rabbit.listener=OFF")
@DirtiesContext
class RabbitFixrabbitProbeTest extends RabbitProbeSupport {

  static final String FIXED_TAG_QUEUE = "idem.fixrabbit-probe.fixed-tag";
  static final String DROPPED_QUEUE = "idem.fixrabbit-probe.dropped";
  static final String REDELIVERED_QUEUE = "idem.fixrabbit-probe.redelivered";
  static final String DROPPED_BATCH_QUEUE = "idem.fixrabbit-probe.dropped-batch";

  /** The consumer tag of every consumer of the fixed-tag factory's containers. */
  static final String FIXED_TAG = "probeh-fixed";

  static final List<String> sent = new CopyOnWriteArrayList<>();

  /** What the application's advice on {@link Listeners#dropped} dropped. */
  static final List<String> dropped = new CopyOnWriteArrayList<>();

  @Autowired SwitchableKeyStore store;

  public static class Listeners {
    /** Keyed by its default header, in a container whose consumer tag is fixed. */
    @RabbitListener(
        id = "fixrabbit-probe-fixed-tag",
        queues = FIXED_TAG_QUEUE,
        containerFactory = "fixrabbitProbeFixedTagFactory")
    @IdempotentListener(name = "fixrabbit-probe-fixed-tag")
    public void fixedTag(String event) {
      sent.add(event);
    }

    /** Keyed by its default header. */
    @RabbitListener(id = "fixrabbit-probe-redelivered", queues = REDELIVERED_QUEUE)
    @IdempotentListener(name = "fixrabbit-probe-redelivered")
    public void redelivered(String event) {
      sent.add(event);
    }

    /**
     * A consumer-side batch listener, each message keyed by its payload; the application's advice
     * around it drops what it throws.
     */
    @RabbitListener(
        id = "fixrabbit-probe-dropped-batch",
        queues = DROPPED_BATCH_QUEUE,
        containerFactory = "fixrabbitProbeBatchFactory")
    @IdempotentListener(name = "fixrabbit-probe-dropped-batch", key = "#payload")
    public void droppedBatch(List<String> events) {
      sent.addAll(events);
    }

    /** Keyed by its payload; the application's advice around it drops what it throws. */
    @RabbitListener(id = "fixrabbit-probe-dropped", queues = DROPPED_QUEUE)
    @IdempotentListener(name = "fixrabbit-probe-dropped", key = "#event")
    public void dropped(String event) {
      sent.add(event);
    }
  }

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ListenerTestConfiguration.class)
  static class App {
    @Bean
    Listeners fixrabbitProbeListeners() {
      return new Listeners();
    }

    @Bean
    Declarables fixrabbitProbeQueues() {
      return deadLetteredQueues(
          FIXED_TAG_QUEUE, DROPPED_QUEUE, REDELIVERED_QUEUE, DROPPED_BATCH_QUEUE);
    }

    @Bean
    SimpleRabbitListenerContainerFactory fixrabbitProbeBatchFactory(
        ConnectionFactory connectionFactory) {
      return consumerBatchFactory(connectionFactory);
    }

    /** Containers whose consumers all take the consumer tag {@link #FIXED_TAG}. */
    @Bean
    SimpleRabbitListenerContainerFactory fixrabbitProbeFixedTagFactory(
        ConnectionFactory connectionFactory) {
      SimpleRabbitListenerContainerFactory factory = new SimpleRabbitListenerContainerFactory();
      factory.setConnectionFactory(connectionFactory);
      factory.setReceiveTimeout(100L);
      factory.setContainerCustomizer(
          (SimpleMessageListenerContainer container) ->
              container.setConsumerTagStrategy(queue -> FIXED_TAG));
      return factory;
    }

    /** The application's "log and drop" advice on Listeners.dropped, outside the guard. */
    @Bean
    @Role(BeanDefinition.ROLE_INFRASTRUCTURE)
    static DefaultPointcutAdvisor fixrabbitProbeDroppingAdvisor() {
      DefaultPointcutAdvisor advisor =
          new DefaultPointcutAdvisor(
              new StaticMethodMatcherPointcut() {
                @Override
                public boolean matches(Method method, Class<?> targetClass) {
                  return targetClass == Listeners.class && method.getName().startsWith("dropped");
                }
              },
              (MethodInterceptor)
                  invocation -> {
                    try {
                      return invocation.proceed();
                    } catch (RuntimeException failure) {
                      dropped.add(failure.getClass().getSimpleName());
                      return null;
                    }
                  });
      advisor.setOrder(Ordered.HIGHEST_PRECEDENCE);
      return advisor;
    }
  }

  @Override
  List<String> sends() {
    return sent;
  }

  /**
   * A plain message (not a producer's batch) with its own Idempotency-Key header, carrying both
   * marker headers as copied from a part, to a header-keyed guarded listener whose consumers take a
   * fixed consumer tag: the copied delivery header names {@code probeh-fixed#1}, which is what the
   * first delivery on the container's channel is. It is a message of its own and must be sent once.
   */
  // Was an open finding, fixed: the bound value now starts with a random value of the consuming
  // JVM's (RabbitProducerBatchParts.THIS_JVM), which no publisher can copy from elsewhere.
  // The finding (severity low: a lost send (rejected without requeue, dead-lettered, unsent) only
  // where the application fixes its consumer tags and a publisher sends the marker headers, copied
  // from a part it consumed or by hand; with server-generated tags, amq.ctag-<random>, the value
  // cannot collide), probeH, Boot 3.5 and 4.0 at 43f6ece7: "[sends of the message (its own key);
  // dead-lettered: [ft-…]] expected: 1 but was: 0".
  // isMarked compares idempotency_producerBatchDelivery with "<consumer tag>#<delivery tag>":
  // delivery tags restart at 1 on each channel, so with a fixed tag the value repeats on every
  // channel (each consumer, each restart) and a copied value is taken as this delivery's own.
  @Test
  void aMessageWhoseCopiedMarkerNamesAFixedTagsFirstDeliveryIsStillSent() throws Exception {
    String event = unique("ft");
    Message copied = message(event);
    copied.getMessageProperties().setHeader("idempotency_producerBatchPart", 1);
    copied.getMessageProperties().setHeader("idempotency_producerBatchDelivery", FIXED_TAG + "#1");
    plain.send("", FIXED_TAG_QUEUE, copied);
    awaitMarker(FIXED_TAG_QUEUE, "ft");
    List<String> deadLettered = drainDeadLetters(FIXED_TAG_QUEUE);

    assertThat(sent(event))
        .as("sends of the message (its own key); dead-lettered: %s", deadLettered)
        .isEqualTo(1);
  }

  /**
   * A payload-keyed guarded listener under the application's advice that drops what the listener
   * throws (ordered before the guard): a message delivered while the store is down is deferred by
   * the guard (nothing sent). Once the store answers it must run once, never be acknowledged unsent
   * because the advice dropped the deferral.
   */
  // Was an open finding, fixed (fixdefer): the guard keeps the deferral it throws for the delivery
  // (Delivery.KeptDeferral), and the container advice requeues the delivery when the call returned
  // with a deferral kept. The finding (severity medium: a lost send, SPEC 1, whenever the store is
  // down or the key in flight, for any guarded listener whose bean has an application advice
  // ordered before the guard that drops failures, a "log and continue" aspect), probeH, Boot 3.5
  // and 4.0 at 43f6ece7, and fixdefer at cd89fe43: "[sends of the deferred message once the store
  // answers; dropped by the application's advice: [DeferredDeliveryException], dead-lettered: []]
  // expected: 1 but was: 0". RabbitDeliveryAdvice kept a part's refusal for the delivery (keptIn)
  // but not a deferral the guard throws inside the listener bean's proxy: the advice there dropped
  // it, the call returned, and the container acknowledged the message, never sent.
  @Test
  void aDeferralDroppedByTheApplicationsAdviceOnTheListenerIsStillSentOnce() throws Exception {
    String event = unique("dd");
    int droppedBefore = dropped.size();
    int refusedBefore = store.refused.get();
    store.down.set(true);
    try {
      plain.send("", DROPPED_QUEUE, withoutKey(event));
      // the deferral dropped by the advice, or (the deferral kept) requeued and refused again
      await(
          "the delivery's deferral dropped, or 5 claims refused",
          () -> dropped.size() > droppedBefore || store.refused.get() >= refusedBefore + 5);
    } finally {
      store.down.set(false);
    }
    String marker = unique("dd-marker");
    plain.send("", DROPPED_QUEUE, withoutKey(marker));
    await(
        "the marker sent, and the deferred message sent or its deferral dropped",
        () -> sent(marker) >= 1 && (sent(event) >= 1 || dropped.size() > droppedBefore));
    List<String> deadLettered = drainDeadLetters(DROPPED_QUEUE);

    assertThat(sent(event))
        .as(
            "sends of the deferred message once the store answers; dropped by the application's"
                + " advice: %s, dead-lettered: %s",
            dropped, deadLettered)
        .isEqualTo(1);
  }

  /**
   * A producer's batch of two messages, each with its own key, to a header-keyed guarded listener
   * while the store is down: the first part is deferred and the whole batch requeued, so it comes
   * back as another delivery (a new delivery tag) and is split again. Once the store answers, the
   * first is sent once and the second, which carries the first's headers, is still recognised as a
   * later part on the redelivery: rejected (the batch dead-lettered), never acknowledged as the
   * first's replay.
   */
  @Test
  void aLaterPartOfARedeliveredBatchIsStillRecognised() throws Exception {
    String first = unique("rd-first");
    String second = unique("rd-second");
    int refusedBefore = store.refused.get();
    store.down.set(true);
    try {
      publishBatch(REDELIVERED_QUEUE, messages(List.of(first, second)));
      await(
          "the batch deferred and redelivered (3 refused claims)",
          () -> store.refused.get() >= refusedBefore + 3);
    } finally {
      store.down.set(false);
    }
    await("the first part sent", () -> sent(first) >= 1);
    awaitMarker(REDELIVERED_QUEUE, "rd");
    List<String> deadLettered = drainDeadLetters(REDELIVERED_QUEUE);

    assertThat(sent(first)).as("sends of the first").isEqualTo(1);
    assertThat(sent(second) == 1 || deadLettered.stream().anyMatch(d -> d.contains(second)))
        .as(
            "the second sent once or dead-lettered; sends: %d, dead-lettered: %s",
            sent(second), deadLettered)
        .isTrue();
  }

  /**
   * The same for a consumer-side batch listener ({@code List<String>}, each message keyed by its
   * payload): a message delivered while the store is down is deferred with its batch; once the
   * store answers it must run once.
   */
  // Was an open finding, fixed (fixdefer) as the record listener's row (severity medium, the same
  // hole for batch listeners: ListenerBatches defers the whole batch inside the bean's proxy, and
  // the dropping advice turned that into an acknowledged batch), probeH, Boot 3.5 and 4.0 at
  // 43f6ece7, and fixdefer at cd89fe43: "[sends of the deferred message once the store answers;
  // dropped by the application's advice: [.., DeferredDeliveryException], dead-lettered: []]
  // expected: 1 but was: 0".
  @Test
  void aBatchDeferralDroppedByTheApplicationsAdviceOnTheListenerIsStillSentOnce() throws Exception {
    String event = unique("db");
    int droppedBefore = dropped.size();
    int refusedBefore = store.refused.get();
    store.down.set(true);
    try {
      plain.send("", DROPPED_BATCH_QUEUE, withoutKey(event));
      // the deferral dropped by the advice, or (the deferral kept) requeued and refused again
      await(
          "the batch's deferral dropped, or 5 claims refused",
          () -> dropped.size() > droppedBefore || store.refused.get() >= refusedBefore + 5);
    } finally {
      store.down.set(false);
    }
    String marker = unique("db-marker");
    plain.send("", DROPPED_BATCH_QUEUE, withoutKey(marker));
    await(
        "the marker sent, and the deferred message sent or its deferral dropped",
        () -> sent(marker) >= 1 && (sent(event) >= 1 || dropped.size() > droppedBefore));
    List<String> deadLettered = drainDeadLetters(DROPPED_BATCH_QUEUE);

    assertThat(sent(event))
        .as(
            "sends of the deferred message once the store answers; dropped by the application's"
                + " advice: %s, dead-lettered: %s",
            dropped, deadLettered)
        .isEqualTo(1);
  }

  /** The bodies in the dead-letter queue of {@code queue} (each waited for up to a second). */
  private List<String> drainDeadLetters(String queue) {
    List<String> bodies = new ArrayList<>();
    for (Message dead = plain.receive(queue + DEAD_LETTERS, 1_000);
        dead != null;
        dead = plain.receive(queue + DEAD_LETTERS, 1_000)) {
      bodies.add(new String(dead.getBody(), StandardCharsets.ISO_8859_1));
    }
    return bodies;
  }
}
