package dev.idempotency.spring.messaging.kafka;

import static dev.idempotency.spring.messaging.Polling.await;
import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.spring.Idempotent;
import dev.idempotency.spring.messaging.EmbeddedKafka;
import dev.idempotency.spring.messaging.Events;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.config.ConcurrentKafkaListenerContainerFactory;
import org.springframework.kafka.config.KafkaListenerEndpointRegistry;
import org.springframework.kafka.config.MethodKafkaListenerEndpoint;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.core.ProducerFactory;
import org.springframework.kafka.listener.ConcurrentMessageListenerContainer;
import org.springframework.kafka.listener.MessageListener;
import org.springframework.messaging.handler.annotation.support.DefaultMessageHandlerMethodFactory;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Kafka listener containers created at runtime by the application, on a real in-JVM KRaft Kafka
 * broker (issue 37, SPEC 15 and 16; found by the probe37c re-probe), in a container-managed Kafka
 * transaction whose commit fails once (the listener's produced record and the offsets are aborted,
 * and the broker delivers the record again). The outcome of an {@code @Idempotent} delivery must be
 * recorded only once the container's transaction committed: the redelivery after the failed commit
 * runs the listener again, never a replay (a replay would leave the aborted output record never
 * produced).
 *
 * <ul>
 *   <li>Spring Kafka's programmatic registration, {@code KafkaListenerEndpointRegistry
 *       .registerListenerContainer(MethodKafkaListenerEndpoint, factory, true)} after the start, of
 *       an {@code @Idempotent} method that carries no {@code @KafkaListener}: the endpoint's method
 *       is a listener method;
 *   <li>a container built by hand with the factory's {@code createContainer(topic)} (which does not
 *       go through {@code createListenerContainer(endpoint)}), whose message listener calls an
 *       {@code @Idempotent} {@code @KafkaListener} method (its own container not started): the
 *       container gets the starter's hooks;
 *   <li>and the other side: an {@code @Idempotent} service method called from a registered
 *       endpoint's (unguarded) method is not a listener method. It records when it returns, so the
 *       redelivery after the failed commit replays it and its provider is called once.
 * </ul>
 */
@SpringBootTest(
    classes = RuntimeKafkaContainerTransactionTest.App.class,
    properties = {
      "spring.kafka.consumer.auto-offset-reset=earliest",
      "spring.kafka.consumer.isolation-level=read-committed",
      "spring.kafka.producer.transaction-id-prefix=idem-runtime-tx-"
    })
@DirtiesContext
class RuntimeKafkaContainerTransactionTest {

  static final String REGISTERED = "kafka-runtime-registered";
  static final String HAND_BUILT = "kafka-runtime-hand-built";
  static final String SERVICE = "kafka-runtime-service";

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ListenerTestConfiguration.class)
  static class App {
    @Bean
    FailingCommits kafkaTransactionManager(ProducerFactory<Object, Object> producers) {
      return new FailingCommits(producers);
    }

    @Bean
    RuntimeListeners runtimeListeners(
        KafkaTemplate<Object, Object> template, FailingCommits commits, Provider service) {
      return new RuntimeListeners(template, commits, service);
    }

    @Bean
    Provider provider() {
      return new Provider();
    }
  }

  /** Guarded listener methods, each producing its event in the container's transaction. */
  public static class RuntimeListeners extends TransactionalRuns {
    private final Provider service;

    RuntimeListeners(
        KafkaTemplate<Object, Object> template, FailingCommits commits, Provider service) {
      super(template, commits);
      this.service = service;
    }

    /** Registered at runtime through a {@code MethodKafkaListenerEndpoint}. */
    @Idempotent(name = REGISTERED, key = "#event")
    public void registered(String event) {
      run(event);
    }

    /** Called by a hand-built container; its own annotated container never starts. */
    @KafkaListener(
        id = HAND_BUILT + "-unused",
        topics = "idem.runtime-unused",
        autoStartup = "false")
    @Idempotent(name = HAND_BUILT, key = "#event")
    public void handBuilt(String event) {
      run(event);
    }

    /** Registered at runtime; not guarded itself, it calls a guarded service method. */
    public void callsTheService(String event) {
      count(event);
      service.send(event);
      produce(event);
    }
  }

  /** A guarded provider call, as a service method that a listener calls. */
  public static class Provider {
    final Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();

    @Idempotent(name = SERVICE, key = "#event")
    public String send(String event) {
      sends.computeIfAbsent(event, e -> new AtomicInteger()).incrementAndGet();
      return "sent-" + event;
    }

    int sends(String event) {
      AtomicInteger count = sends.get(event);
      return count == null ? 0 : count.get();
    }
  }

  @DynamicPropertySource
  static void kafka(DynamicPropertyRegistry registry) {
    EmbeddedKafka.addProperties(registry);
  }

  @Autowired Events events;
  @Autowired FailingCommits commits;
  @Autowired KafkaTemplate<Object, Object> template;
  @Autowired RuntimeListeners listeners;
  @Autowired Provider provider;
  @Autowired KafkaListenerEndpointRegistry registry;
  @Autowired ConcurrentKafkaListenerContainerFactory<Object, Object> factory;
  @Autowired BeanFactory beanFactory;

  @Test
  void aContainerRegisteredAtRuntimeRecordsOnlyAfterItsCommit() throws Exception {
    String topic = register(REGISTERED, "registered");

    assertRedeliveryAfterAFailedCommitRunsAgain(REGISTERED, topic);
  }

  @Test
  void aServiceMethodCalledFromARegisteredEndpointRecordsWhenItReturns() throws Exception {
    String topic = register(SERVICE, "callsTheService");
    String event = SERVICE + "-commit-fails-" + UUID.randomUUID().toString().substring(0, 8);
    commits.failNextCommitOf(event);
    publish(topic, event);

    await("the redelivery after the failed commit", () -> listeners.runs(event) >= 2);
    await(
        "the service's call in the redelivery replayed",
        () -> events.count(Type.REPLAYED, SERVICE, event) == 1);
    assertThat(provider.sends(event))
        .as(
            "the provider was called once: the service's outcome was recorded when it returned,"
                + " not released with the failed commit (events %s)",
            events.operations(SERVICE, event))
        .isEqualTo(1);
  }

  /** Registers a container for a method of {@link RuntimeListeners}, on a topic of its own. */
  private String register(String name, String method) throws Exception {
    String topic = "idem.runtime-" + name + "-" + UUID.randomUUID().toString().substring(0, 8);
    MethodKafkaListenerEndpoint<Object, Object> endpoint = new MethodKafkaListenerEndpoint<>();
    endpoint.setId(topic);
    endpoint.setGroupId(topic);
    endpoint.setTopics(topic);
    endpoint.setBean(listeners);
    endpoint.setMethod(RuntimeListeners.class.getMethod(method, String.class));
    endpoint.setBeanFactory(beanFactory);
    DefaultMessageHandlerMethodFactory methods = new DefaultMessageHandlerMethodFactory();
    methods.afterPropertiesSet();
    endpoint.setMessageHandlerMethodFactory(methods);
    registry.registerListenerContainer(endpoint, factory, true);
    return topic;
  }

  private void publish(String topic, String event) throws Exception {
    template
        .executeInTransaction(operations -> operations.send(topic, event))
        .get(30, TimeUnit.SECONDS);
  }

  @Test
  void aContainerBuiltByHandFromTheFactoryRecordsOnlyAfterItsCommit() throws Exception {
    String topic = "idem.runtime-hand-built-" + UUID.randomUUID().toString().substring(0, 8);
    ConcurrentMessageListenerContainer<Object, Object> container = factory.createContainer(topic);
    container.getContainerProperties().setGroupId(HAND_BUILT + "-" + topic);
    container.setupMessageListener(
        (MessageListener<Object, Object>)
            (ConsumerRecord<Object, Object> record) ->
                listeners.handBuilt(String.valueOf(record.value())));
    container.start();
    try {
      assertRedeliveryAfterAFailedCommitRunsAgain(HAND_BUILT, topic);
    } finally {
      container.stop();
    }
  }

  private void assertRedeliveryAfterAFailedCommitRunsAgain(String name, String topic)
      throws Exception {
    String event = name + "-commit-fails-" + UUID.randomUUID().toString().substring(0, 8);
    commits.failNextCommitOf(event);
    publish(topic, event);

    await(
        "the redelivery after the failed commit, run or replayed",
        () -> listeners.runs(event) >= 2 || events.count(Type.REPLAYED, name, event) > 0);
    assertThat(events.count(Type.REPLAYED, name, event))
        .as(
            "the redelivery of a delivery whose container transaction rolled back is not a replay"
                + " (listener runs %d, events %s)",
            listeners.runs(event), events.operations(name, event))
        .isZero();
    assertThat(listeners.runs(event)).as("the listener ran again for the redelivery").isEqualTo(2);
  }
}
