package dev.idempotency.spring.messaging.kafka;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.Idempotent;
import dev.idempotency.spring.messaging.EmbeddedKafka;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import dev.idempotency.spring.messaging.Polling;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.aop.framework.Advised;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.kafka.config.AbstractKafkaListenerEndpoint;
import org.springframework.kafka.config.ConcurrentKafkaListenerContainerFactory;
import org.springframework.kafka.config.ContainerCustomizer;
import org.springframework.kafka.config.KafkaListenerEndpointRegistry;
import org.springframework.kafka.core.ConsumerFactory;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.listener.AcknowledgingMessageListener;
import org.springframework.kafka.listener.BatchAcknowledgingConsumerAwareMessageListener;
import org.springframework.kafka.listener.BatchMessageListener;
import org.springframework.kafka.listener.ConcurrentMessageListenerContainer;
import org.springframework.kafka.listener.ConsumerAwareMessageListener;
import org.springframework.kafka.listener.ContainerProperties;
import org.springframework.kafka.listener.MessageListener;
import org.springframework.kafka.listener.MessageListenerContainer;
import org.springframework.kafka.listener.adapter.MessagingMessageListenerAdapter;
import org.springframework.kafka.support.converter.MessageConverter;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * probeX, on the shared in-JVM KRaft broker: the shapes of Spring Kafka message listeners that are
 * not {@code @KafkaListener} methods, around the starter's kept deferrals ({@code
 * KafkaKeptDeferrals}, 6ab7094e: the wrapper calls its delegate by the delegate's own listener
 * type, {@code delegateType}). A {@code @KafkaListener} method's listener is always Spring's
 * messaging adapter (acknowledging and consumer-aware), so only a listener the application gives a
 * container itself reaches the other branches: an endpoint registered at runtime whose container
 * gets a plain {@code MessageListener}, {@code AcknowledgingMessageListener}, {@code
 * ConsumerAwareMessageListener}, {@code BatchMessageListener} or {@code
 * BatchAcknowledgingConsumerAwareMessageListener}; a container built with the factory's {@code
 * createContainer(topic)} (docs/message-consumers.md: "gets the hooks as it is created"); and a
 * container bean built outside a factory (documented to get no hooks). Each listener calls an
 * {@code @Idempotent} notifier while the store is down, and either catches the deferral ("log and
 * continue") or lets it through; the record must be sent once the store answers (SPEC 1, 15).
 */
@SpringBootTest(
    classes = KafkaProbeXContainerShapesProbeTest.App.class,
    properties = {
      "spring.kafka.consumer.auto-offset-reset=earliest",
      "idempotency.in-flight-wait=50ms",
      "idempotency.messaging.back-off.initial=50ms",
      "idempotency.messaging.back-off.max=300ms"
    })
@DirtiesContext
class KafkaProbeXContainerShapesProbeTest {

  static final String PREFIX = "idem.probex.shapes.";
  static final String[] TOPICS = {
    "simple",
    "acknowledging",
    "consumer-aware",
    "batch",
    "batch-ack-consumer",
    "factory-caught",
    "factory-rethrown",
    "bean-rethrown"
  };
  static final String BEAN_CONTAINER_ID = "probex-bean-container";

  /** The containers with {@code MANUAL} acknowledgement ({@link App#probexManualAcks}). */
  static final java.util.Set<String> MANUAL_IDS =
      java.util.Set.of("probex-acknowledging", "probex-batch-ack-consumer");

  static final List<String> sent = new CopyOnWriteArrayList<>();

  /** How often each event reached a listener. */
  static final Map<String, AtomicInteger> deliveries = new ConcurrentHashMap<>();

  /** How often a guarded call for each event failed (caught or rethrown by the listener). */
  static final Map<String, AtomicInteger> failed = new ConcurrentHashMap<>();

  /** The simple class names of each event's failed calls, in order. */
  static final Map<String, List<String>> failureTypes = new ConcurrentHashMap<>();

  /** Arguments a listener got null where its container must give one ("ack", "consumer"). */
  static final List<String> missingArguments = new CopyOnWriteArrayList<>();

  static int count(Map<String, AtomicInteger> counts, String event) {
    AtomicInteger count = counts.get(event);
    return count == null ? 0 : count.get();
  }

  static void add(Map<String, AtomicInteger> counts, String event) {
    counts.computeIfAbsent(event, e -> new AtomicInteger()).incrementAndGet();
  }

  static long sends(String event) {
    return sent.stream().filter(event::equals).count();
  }

  /** The provider call, guarded by {@code @Idempotent}, keyed by the event. */
  public static class Notifier {
    @Idempotent(name = "probex-shapes-notify", key = "#event")
    public void send(String event) {
      sent.add(event);
    }
  }

  /**
   * One delivery of {@code event}: the guarded call, its failure caught (whether it returned) or
   * rethrown.
   */
  static boolean handle(Notifier notifier, String event, boolean rethrow) {
    add(deliveries, event);
    try {
      notifier.send(event);
      return true;
    } catch (RuntimeException failure) {
      add(failed, event);
      failureTypes
          .computeIfAbsent(event, e -> new CopyOnWriteArrayList<>())
          .add(failure.getClass().getSimpleName());
      if (rethrow) {
        throw failure;
      }
      return false;
    }
  }

  /**
   * An endpoint the application registers at runtime whose container gets the given message
   * listener, not a method's adapter: the starter sees it in the factory's {@code
   * createListenerContainer(endpoint)} with its listener set.
   */
  static final class GivenListenerEndpoint extends AbstractKafkaListenerEndpoint<String, String> {
    private final Object listener;

    GivenListenerEndpoint(String topic, Object listener) {
      String id = "probex-" + topic;
      setId(id);
      setGroupId(id);
      setTopics(PREFIX + topic);
      this.listener = listener;
    }

    @Override
    public void setupListenerContainer(
        MessageListenerContainer container, MessageConverter converter) {
      container.setupMessageListener(listener);
    }

    @Override
    protected MessagingMessageListenerAdapter<String, String> createMessageListener(
        MessageListenerContainer container, MessageConverter converter) {
      throw new UnsupportedOperationException("the container gets its listener as it is");
    }
  }

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ListenerTestConfiguration.class)
  static class App {
    @Bean
    Notifier probexShapesNotifier() {
      return new Notifier();
    }

    @Bean
    org.springframework.kafka.core.KafkaAdmin.NewTopics probexShapesNewTopics() {
      return new org.springframework.kafka.core.KafkaAdmin.NewTopics(
          java.util.Arrays.stream(TOPICS)
              .map(topic -> new NewTopic(PREFIX + topic, 1, (short) 1))
              .toArray(NewTopic[]::new));
    }

    /**
     * {@code MANUAL} acknowledgement for the acknowledging listeners' containers: the factory
     * copies its own properties over an endpoint's container after the endpoint set it up, and
     * applies this after that.
     */
    @Bean
    ContainerCustomizer<Object, Object, ConcurrentMessageListenerContainer<Object, Object>>
        probexManualAcks() {
      return container -> {
        if (MANUAL_IDS.contains(container.getBeanName())) {
          container.getContainerProperties().setAckMode(ContainerProperties.AckMode.MANUAL);
        }
      };
    }

    /**
     * A container bean built outside a factory, its listener calling the notifier and letting what
     * it throws through; started by its test.
     */
    @Bean
    @SuppressWarnings("unchecked")
    ConcurrentMessageListenerContainer<String, String> probexBeanContainer(
        ConsumerFactory<?, ?> consumers, Notifier notifier) {
      ContainerProperties properties = new ContainerProperties(PREFIX + "bean-rethrown");
      properties.setGroupId(BEAN_CONTAINER_ID);
      properties.setMessageListener(
          (MessageListener<String, String>) record -> handle(notifier, record.value(), true));
      ConcurrentMessageListenerContainer<String, String> container =
          new ConcurrentMessageListenerContainer<>(
              (ConsumerFactory<String, String>) consumers, properties);
      container.setBeanName(BEAN_CONTAINER_ID);
      container.setAutoStartup(false);
      return container;
    }
  }

  @DynamicPropertySource
  static void kafka(DynamicPropertyRegistry registry) {
    EmbeddedKafka.addProperties(registry);
  }

  @Autowired KafkaTemplate<String, String> template;
  @Autowired SwitchableKeyStore store;
  @Autowired KafkaListenerEndpointRegistry registry;
  @Autowired Notifier notifier;
  @Autowired ConcurrentKafkaListenerContainerFactory<?, ?> factory;

  @Autowired ConcurrentMessageListenerContainer<String, String> beanContainer;

  private final List<MessageListenerContainer> started = new CopyOnWriteArrayList<>();

  @BeforeEach
  void forgetMissingArguments() {
    missingArguments.clear();
  }

  @AfterEach
  void stopStarted() {
    store.down.set(false);
    started.forEach(MessageListenerContainer::stop);
  }

  /** A plain {@code MessageListener} (delegate type SIMPLE), the deferral caught. */
  @Test
  void aSimpleRecordListenersCaughtDeferralIsStillSentOnce() throws Exception {
    register(
        "simple",
        (MessageListener<String, String>) record -> handle(notifier, record.value(), false));
    assertCaughtDeferralStillSentOnce("simple");
  }

  /**
   * An {@code AcknowledgingMessageListener} with {@code MANUAL} acknowledgement (delegate type
   * ACKNOWLEDGING), acknowledging only a call that returned: it must get the container's
   * acknowledgement on every delivery.
   */
  @Test
  void anAcknowledgingRecordListenersCaughtDeferralIsStillSentOnce() throws Exception {
    register(
        "acknowledging",
        (AcknowledgingMessageListener<String, String>)
            (record, acknowledgment) -> {
              if (acknowledgment == null) {
                missingArguments.add("ack of " + record.value());
              }
              if (handle(notifier, record.value(), false) && acknowledgment != null) {
                acknowledgment.acknowledge();
              }
            });
    assertCaughtDeferralStillSentOnce("acknowledging");
  }

  /** A {@code ConsumerAwareMessageListener} (delegate type CONSUMER_AWARE), the deferral caught. */
  @Test
  void aConsumerAwareRecordListenersCaughtDeferralIsStillSentOnce() throws Exception {
    register(
        "consumer-aware",
        (ConsumerAwareMessageListener<String, String>)
            (record, consumer) -> {
              if (consumer == null) {
                missingArguments.add("consumer of " + record.value());
              }
              handle(notifier, record.value(), false);
            });
    assertCaughtDeferralStillSentOnce("consumer-aware");
  }

  /** A plain {@code BatchMessageListener} (delegate type SIMPLE), each record's deferral caught. */
  @Test
  void aSimpleBatchListenersCaughtDeferralIsStillSentOnce() throws Exception {
    register(
        "batch",
        (BatchMessageListener<String, String>)
            records -> {
              for (ConsumerRecord<String, String> record : records) {
                handle(notifier, record.value(), false);
              }
            });
    assertCaughtDeferralStillSentOnce("batch");
  }

  /**
   * A {@code BatchAcknowledgingConsumerAwareMessageListener} with {@code MANUAL} acknowledgement,
   * acknowledging the batch only when every call returned.
   */
  @Test
  void anAcknowledgingConsumerAwareBatchListenersCaughtDeferralIsStillSentOnce() throws Exception {
    register(
        "batch-ack-consumer",
        (BatchAcknowledgingConsumerAwareMessageListener<String, String>)
            (records, acknowledgment, consumer) -> {
              if (acknowledgment == null) {
                missingArguments.add("ack of a batch of " + records.size());
              }
              if (consumer == null) {
                missingArguments.add("consumer of a batch of " + records.size());
              }
              boolean all = true;
              for (ConsumerRecord<String, String> record : records) {
                all &= handle(notifier, record.value(), false);
              }
              if (all && acknowledgment != null) {
                acknowledgment.acknowledge();
              }
            });
    assertCaughtDeferralStillSentOnce("batch-ack-consumer");
  }

  /**
   * A container built with the factory's {@code createContainer(topic)}, then given its listener
   * and started by the application, which docs/message-consumers.md says "gets the hooks as it is
   * created"; the listener catches the deferral.
   */
  // Was an open finding (probeX, Boot 3.5 and 4.0 at 0c7d68c7; severity medium: a lost send, SPEC
  // 1 and 15, for a container built with createContainer(..) whose listener, or a service it
  // calls, catches a deferral): "[sends of the event whose deferral the listener caught;
  // deliveries: 1, failed: 1] expected: 1L but was: 0L" on both lines, the record committed unsent
  // after one delivery. The starter's hooks run on the container as the factory's
  // createContainer(..) returns it, before the application gives it a listener:
  // KafkaKeptDeferrals.wrapListenerOf found no listener and wrapped none, and the start-up hook
  // (ListenerContainerHooks.kafkaContainers) covers only the registry's containers. Fixed by
  // fixcreate: such a container gets KafkaKeptDeferralAdvice first in its properties' advice
  // chain, which Spring Kafka applies to the listener set afterwards.
  @Test
  void aFactoryBuiltContainersCaughtDeferralIsStillSentOnce() throws Exception {
    byHand("factory-caught", false);
    assertCaughtDeferralStillSentOnce("factory-caught");
  }

  /**
   * The control: the same container, its listener letting the deferral through, the store down past
   * Spring Kafka's default ten tries: the starter's error handler (installed as the factory created
   * the container) retries it until the store answers. 11 to 37 s on a loaded machine.
   */
  @Tag("extended")
  @Test
  void aFactoryBuiltContainersRethrownDeferralIsSentOnce() throws Exception {
    byHand("factory-rethrown", true);
    assertDeferralOutlastingTenTriesIsSentOnce("factory-rethrown");
  }

  /**
   * A container bean built outside a factory ({@code new
   * ConcurrentMessageListenerContainer<>(..)}), its listener letting the deferral through, the
   * store down past Spring Kafka's default ten tries: documented to get no hooks
   * (docs/message-consumers.md, "Listeners created after the start"), which names only the
   * transaction's consequence. It passed on Boot 3.5 and 4.0 (probeX, at 0c7d68c7: the record
   * retried past ten tries and sent once, about 7 s), though the container keeps Spring Kafka's own
   * {@code DefaultErrorHandler} (ten tries, no pause, then logged and skipped). Why it went past
   * ten (seen on both lines, printed): the failed calls' types were KeyStoreException six times,
   * then the guard's breaker refusal (StoreOutages.Refused) and KeyStoreException in turn, and that
   * handler starts counting again whenever the exception's type changes. Suspected, not shown: a
   * store whose failures keep one type for ten tries in a row would have the record skipped unsent
   * (a lost send) in such a container. About 7 s.
   */
  @Tag("extended")
  @Test
  void aContainerBeanBuiltOutsideAFactoryRetriesItsDeferralUntilSent() throws Exception {
    started.add(beanContainer);
    beanContainer.start();
    assertDeferralOutlastingTenTriesIsSentOnce("bean-rethrown");
  }

  private void register(String topic, Object listener) {
    GivenListenerEndpoint endpoint = new GivenListenerEndpoint(topic, listener);
    registry.registerListenerContainer(endpoint, factory, true);
    MessageListenerContainer container = registry.getListenerContainer(endpoint.getId());
    started.add(container);
    assertThat(container.isRunning()).as("the registered container running").isTrue();
  }

  /** A container from {@code factory.createContainer(topic)}, given its listener, started. */
  @SuppressWarnings("unchecked")
  private void byHand(String topic, boolean rethrow) {
    ConcurrentMessageListenerContainer<String, String> container =
        (ConcurrentMessageListenerContainer<String, String>)
            factory.createContainer(PREFIX + topic);
    container.getContainerProperties().setGroupId("probex-" + topic);
    container.setupMessageListener(
        (MessageListener<String, String>) record -> handle(notifier, record.value(), rethrow));
    started.add(container);
    container.start();
    assertAdvisedOnce(container);
  }

  /**
   * The listener of a container built with {@code createContainer(..)}, and of each of its
   * consumers (which copy it as they start), carries the starter's advice (fixcreate) once.
   */
  private static void assertAdvisedOnce(ConcurrentMessageListenerContainer<?, ?> container) {
    List<Object> listeners = new java.util.ArrayList<>();
    listeners.add(container.getContainerProperties().getMessageListener());
    container
        .getContainers()
        .forEach(consumer -> listeners.add(consumer.getContainerProperties().getMessageListener()));
    for (Object listener : listeners) {
      assertThat(listener).as("the listener, advised").isInstanceOf(Advised.class);
      assertThat(
              java.util.Arrays.stream(((Advised) listener).getAdvisors())
                  .filter(
                      advisor ->
                          advisor
                              .getAdvice()
                              .getClass()
                              .getSimpleName()
                              .equals("KafkaKeptDeferralAdvice"))
                  .count())
          .as("the starter's advices on the listener")
          .isEqualTo(1);
    }
  }

  /**
   * Publishes an event to the topic while the store is down, waits until its guarded call failed
   * twice (a retry) or 15 s passed after the first, then the store up and a marker behind it: the
   * event must be sent once by the time the marker is, and every delivery must have had the
   * arguments its listener's type takes.
   */
  private void assertCaughtDeferralStillSentOnce(String topic) throws Exception {
    String event = topic + "-" + UUID.randomUUID();
    store.down.set(true);
    try {
      template.send(PREFIX + topic, event).get(30, TimeUnit.SECONDS);
      Polling.await("the event's deferral", () -> count(failed, event) >= 1);
      awaitAtMost(15, () -> count(failed, event) >= 2);
    } finally {
      store.down.set(false);
    }
    String marker = topic + "-marker-" + UUID.randomUUID();
    template.send(PREFIX + topic, marker).get(30, TimeUnit.SECONDS);
    Polling.await("the marker sent", () -> sends(marker) >= 1);

    assertThat(sends(event))
        .as(
            "sends of the event whose deferral the listener caught; deliveries: %s, failed: %s",
            count(deliveries, event), count(failed, event))
        .isEqualTo(1);
    assertThat(sends(marker)).as("sends of the marker").isEqualTo(1);
    assertThat(missingArguments).as("arguments the listener got null").isEmpty();
  }

  /**
   * Publishes an event while the store is down and keeps it down until its call failed twelve times
   * (past Spring Kafka's default of ten tries) or 20 s passed, then the store up and a marker
   * behind it: the event must be sent once by the time the marker is.
   */
  private void assertDeferralOutlastingTenTriesIsSentOnce(String topic) throws Exception {
    String event = topic + "-" + UUID.randomUUID();
    store.down.set(true);
    try {
      template.send(PREFIX + topic, event).get(30, TimeUnit.SECONDS);
      Polling.await("the event's deferral", () -> count(failed, event) >= 1);
      awaitAtMost(20, () -> count(failed, event) >= 12);
    } finally {
      store.down.set(false);
    }
    String marker = topic + "-marker-" + UUID.randomUUID();
    template.send(PREFIX + topic, marker).get(30, TimeUnit.SECONDS);
    Polling.await("the marker sent", () -> sends(marker) >= 1);

    System.out.println(
        "probeX: the failures of " + topic + "'s event, in order: " + failureTypes.get(event));
    assertThat(count(failed, event))
        .as(
            "failed calls while the store was down (Spring Kafka's default handler stops at ten;"
                + " their types: %s)",
            failureTypes.get(event))
        .isGreaterThanOrEqualTo(12);
    assertThat(sends(event))
        .as(
            "sends of the event whose deferral reached the container; deliveries: %s, failed: %s",
            count(deliveries, event), count(failed, event))
        .isEqualTo(1);
  }

  /** Waits until the condition holds or {@code seconds} passed; whether it held. */
  private static boolean awaitAtMost(int seconds, BooleanSupplier condition)
      throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        return false;
      }
      Thread.sleep(20);
    }
    return true;
  }
}
