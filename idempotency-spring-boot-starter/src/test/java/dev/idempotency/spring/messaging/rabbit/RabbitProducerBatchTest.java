package dev.idempotency.spring.messaging.rabbit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.spring.IdempotencyConfigurationException;
import dev.idempotency.spring.messaging.IdempotentDelivery;
import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import dev.idempotency.testservers.RabbitMqServer;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.amqp.core.Declarables;
import org.springframework.amqp.core.QueueBuilder;
import org.springframework.amqp.rabbit.annotation.RabbitListener;
import org.springframework.amqp.rabbit.config.SimpleRabbitListenerContainerFactory;
import org.springframework.amqp.rabbit.connection.ConnectionFactory;
import org.springframework.amqp.rabbit.core.BatchingRabbitTemplate;
import org.springframework.amqp.rabbit.listener.RabbitListenerEndpointRegistry;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.core.NestedExceptionUtils;
import org.springframework.test.annotation.DirtiesContext;

/**
 * probe46's finding on fixlist45 (issue 37), on a real RabbitMQ broker: Spring AMQP's own first
 * batch setup, a factory with {@code batchListener = true} and no consumer-side batching, whose
 * listener gets the batches a producer made ({@link BatchingRabbitTemplate}). The container hands
 * the advice chain one AMQP message (the producer's batch) and Spring AMQP's adapter splits it into
 * the list the listener takes. fixlist45 ran a {@code List} method of a delivery of one message as
 * one record: one key for the whole producer batch (a message that came again in another batch was
 * sent again), and no batch contexts (a listener that asks {@code IdempotentDelivery.context} never
 * sent). Now a producer's batch is a batch delivery ({@code RabbitDeliveryAdvice}); the two
 * payload-keyed cases failed before. A header-keyed listener cannot work there: a producer's batch
 * keeps the first message's headers only (Spring AMQP's {@code SimpleBatchingStrategy}), so it
 * fails the start ({@code RabbitProducerBatches}).
 */
@ExtendWith(OutputCaptureExtension.class)
@SpringBootTest(
    classes = RabbitProducerBatchTest.App.class,
    // a listener that fails is requeued at once, over and over: its stack traces would fill the log
    properties = "logging.level.org.springframework.amqp.rabbit.listener=OFF")
@DirtiesContext
class RabbitProducerBatchTest extends RabbitProbeSupport {

  static final String PAYLOAD_KEYED = "rabbit-producer-batch-payload";
  static final String HEADER_KEYED = "rabbit-producer-batch-header";
  static final String PAYLOAD_QUEUE = "idem.producer-batch.payload";
  static final String HEADER_QUEUE = "idem.producer-batch.header";
  static final String CONTEXT_KEYED = "rabbit-producer-batch-context";
  static final String CONTEXT_QUEUE = "idem.producer-batch.context";

  /**
   * Listeners of producer batches, as Spring AMQP's batch documentation shows them: one that
   * records each message it sends itself, and one that asks {@link
   * IdempotentDelivery#context(Object)} for each message's provider key, as
   * docs/message-consumers.md tells a batch listener to.
   */
  public static class ProducerBatchListeners {
    // static: the bean is a class-based proxy, whose own fields the test would read
    static final List<List<String>> batches = new CopyOnWriteArrayList<>();
    static final List<String> sent = new CopyOnWriteArrayList<>();

    @RabbitListener(
        id = PAYLOAD_KEYED,
        queues = PAYLOAD_QUEUE,
        containerFactory = "producerBatchFactory")
    @IdempotentListener(name = PAYLOAD_KEYED, key = "#payload")
    public void payloadKeyed(List<String> events) {
      batches.add(List.copyOf(events));
      sent.addAll(events);
    }

    @RabbitListener(
        id = CONTEXT_KEYED,
        queues = CONTEXT_QUEUE,
        containerFactory = "producerBatchFactory")
    @IdempotentListener(name = CONTEXT_KEYED, key = "#payload")
    public void withProviderKeys(List<String> events) {
      batches.add(List.copyOf(events));
      for (String event : events) {
        IdempotentDelivery.context(event).providerKey();
        sent.add(event);
      }
    }
  }

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ListenerTestConfiguration.class)
  static class App {
    @Bean
    ProducerBatchListeners producerBatchListeners() {
      return new ProducerBatchListeners();
    }

    @Bean
    Declarables producerBatchQueues() {
      return new Declarables(
          QueueBuilder.nonDurable(PAYLOAD_QUEUE).build(),
          QueueBuilder.nonDurable(CONTEXT_QUEUE).build());
    }

    /** Spring AMQP's documented batch factory: batch listener, batches made by the producer. */
    @Bean
    SimpleRabbitListenerContainerFactory producerBatchFactory(ConnectionFactory connectionFactory) {
      return RabbitProducerBatchTest.producerBatchFactory(connectionFactory);
    }
  }

  static SimpleRabbitListenerContainerFactory producerBatchFactory(
      ConnectionFactory connectionFactory) {
    SimpleRabbitListenerContainerFactory factory = new SimpleRabbitListenerContainerFactory();
    factory.setConnectionFactory(connectionFactory);
    factory.setBatchListener(true);
    return factory;
  }

  /** A batch listener of producer batches keyed by the Idempotency-Key header. */
  public static class HeaderKeyedListener {
    @RabbitListener(
        id = HEADER_KEYED,
        queues = HEADER_QUEUE,
        containerFactory = "producerBatchFactory")
    @IdempotentListener(name = HEADER_KEYED)
    public void headerKeyed(List<String> events) {
      ProducerBatchListeners.sent.addAll(events);
    }
  }

  /** An application with {@link HeaderKeyedListener} alone, on the producer batch factory. */
  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ListenerTestConfiguration.class)
  static class HeaderKeyedApp {
    @Bean
    HeaderKeyedListener headerKeyedListener() {
      return new HeaderKeyedListener();
    }

    @Bean
    Declarables headerQueue() {
      return new Declarables(QueueBuilder.nonDurable(HEADER_QUEUE).build());
    }

    @Bean
    SimpleRabbitListenerContainerFactory producerBatchFactory(ConnectionFactory connectionFactory) {
      return RabbitProducerBatchTest.producerBatchFactory(connectionFactory);
    }
  }

  @Autowired RabbitListenerEndpointRegistry registry;

  @Override
  List<String> sends() {
    return ProducerBatchListeners.sent;
  }

  /**
   * Two producer batches sharing a message, keyed by the payload: each message is its own key
   * (docs/message-consumers.md, batch listeners), so the shared one is sent once. Broken: each
   * batch runs as one record whose key is its whole list, and the shared message is sent again.
   */
  @Test
  void aMessageInTwoProducerBatchesIsSentOnce() throws Exception {
    String first = unique("pb-first");
    String shared = unique("pb-shared");
    String last = unique("pb-last");
    publishBatch(PAYLOAD_QUEUE, List.of(withoutKey(first), withoutKey(shared)));
    await("the first batch sent", () -> sent(shared) >= 1);
    publishBatch(PAYLOAD_QUEUE, List.of(withoutKey(shared), withoutKey(last)));
    await("the second batch's new message sent", () -> sent(last) >= 1);

    assertThat(ProducerBatchListeners.batches)
        .as("the listener got each producer batch as one list (the premise)")
        .contains(List.of(first, shared));
    assertThat(new int[] {sent(first), sent(shared), sent(last)})
        .as("provider sends of first, shared, last")
        .containsExactly(1, 1, 1);
  }

  /**
   * A header-keyed batch listener on a factory that consumes producer batches fails the start,
   * naming it and telling to key it by the payload; Spring Boot reports the starter's problem and
   * action (its {@code FailureAnalyzer}). Was the open finding {@code
   * aHeaderKeyedMessageOfAProducerBatchIsNotSentAgainOnItsRetry}: a producer batch of two messages,
   * each with its own Idempotency-Key header, then the second published again on its own (a
   * producer retry) must be a replay. The producer's batch carries the first message's headers only
   * (Spring AMQP's {@code SimpleBatchingStrategy}), so the second's key never arrives:
   * RabbitDeliveryAdvice gives a producer batch's parts no headers, and the whole batch was
   * rejected without requeue (MissingIdempotencyKeyException, SPEC 15's dead-letter path: "timed
   * out after 45 s waiting for the batch sent"), nothing sent, or dropped where the queue has no
   * dead-letter exchange. The starter cannot know each part's key, so the listener is refused
   * before any message is taken. A payload-keyed listener on the same factory starts ({@link App}).
   */
  @Test
  void aHeaderKeyedListenerOfProducerBatchesFailsTheStart(CapturedOutput output) {
    assertThatThrownBy(
            () ->
                new SpringApplicationBuilder(HeaderKeyedApp.class)
                    .web(WebApplicationType.NONE)
                    .properties(
                        "spring.rabbitmq.host=127.0.0.1",
                        "spring.rabbitmq.port=" + RabbitMqServer.shared().port(),
                        "spring.main.banner-mode=off")
                    .run()
                    .close())
        .satisfies(
            failure ->
                assertThat(NestedExceptionUtils.getMostSpecificCause(failure))
                    .isInstanceOf(IdempotencyConfigurationException.class)
                    .hasMessageContainingAll(
                        "@IdempotentListener on "
                            + HeaderKeyedListener.class.getName()
                            + ".headerKeyed(..) reads its key from a message header",
                        "container '" + HEADER_KEYED + "'",
                        "keeps the first message's headers only",
                        "Key this listener by its payload"));
    String nl = System.lineSeparator();
    assertThat(output)
        .contains("APPLICATION FAILED TO START")
        .contains("Description:" + nl + nl + "@IdempotentListener on ")
        .contains("Action:" + nl + nl + "Key this listener by its payload");
  }

  /**
   * A producer batch to a listener that takes each message's provider key from {@code
   * IdempotentDelivery.context(element)}, as the docs tell a batch listener to: each message is
   * sent once. Broken: the batch runs as a record delivery, where {@code context(element)} throws
   * ("no idempotent batch on this thread"); the listener fails, the message is requeued and fails
   * again, over and over: nothing is ever sent.
   */
  @Test
  void aProducerBatchWhoseListenerAsksForProviderKeysIsSent() throws Exception {
    String first = unique("pc-first");
    String second = unique("pc-second");
    try {
      publishBatch(CONTEXT_QUEUE, List.of(withoutKey(first), withoutKey(second)));
      await("the batch sent", () -> sent(second) >= 1);
      assertThat(new int[] {sent(first), sent(second)})
          .as("provider sends of first, second")
          .containsExactly(1, 1);
    } finally {
      // a delivery that fails for ever is requeued at once, for ever: stop it
      registry.getListenerContainer(CONTEXT_KEYED).stop();
    }
  }
}
