package dev.idempotency.spring.messaging.kafka;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.EmbeddedKafka;
import dev.idempotency.spring.messaging.IdempotentDelivery;
import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.testservers.Poll;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.config.ContainerCustomizer;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.listener.BatchInterceptor;
import org.springframework.kafka.listener.ConcurrentMessageListenerContainer;
import org.springframework.kafka.listener.RecordInterceptor;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Issue 37 (probeF; SPEC 15): the starter binds each Kafka delivery through the record and batch
 * interceptor it adds to every container factory; a header key is read from what it binds. An
 * application that sets its own {@code RecordInterceptor} and {@code BatchInterceptor} on each
 * container (a {@code ContainerCustomizer} bean, which Boot applies to its factory, e.g. for
 * tracing) replaced the starter's on the container: every record was treated as poison ("no
 * Idempotency-Key header") and recovered unsent. The starter's interceptor is now composed with the
 * application's on each container: two records of one key, the listener runs once, and the
 * application's interceptor still sees every record. On the shared in-JVM KRaft broker.
 */
@SpringBootTest(
    classes = KafkaContainerInterceptorTest.App.class,
    properties = {
      "spring.kafka.consumer.group-id=idem-container-interceptor",
      "spring.kafka.consumer.auto-offset-reset=earliest"
    })
@DirtiesContext
class KafkaContainerInterceptorTest {

  static final String TOPIC = "idem.container-interceptor";
  static final String BATCH_TOPIC = "idem.container-batch-interceptor";

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  static class App {
    @Bean
    NewTopic recordTopic() {
      return new NewTopic(TOPIC, 1, (short) 1);
    }

    @Bean
    NewTopic batchTopic() {
      return new NewTopic(BATCH_TOPIC, 1, (short) 1);
    }

    @Bean
    Seen seen() {
      return new Seen();
    }

    @Bean
    HeaderKeyedListeners headerKeyedListeners(Seen seen) {
      return new HeaderKeyedListeners(seen);
    }

    /** The application's own interceptors, set on each container (tracing, say). */
    @Bean
    ContainerCustomizer<Object, Object, ConcurrentMessageListenerContainer<Object, Object>>
        ownInterceptors(Seen seen) {
      return container -> {
        container.setRecordInterceptor(new Tracing(seen));
        container.setBatchInterceptor(new Tracing(seen));
      };
    }
  }

  /** An application's record and batch interceptor: notes each value it sees. */
  record Tracing(Seen seen)
      implements RecordInterceptor<Object, Object>, BatchInterceptor<Object, Object> {
    @Override
    public ConsumerRecord<Object, Object> intercept(
        ConsumerRecord<Object, Object> record, Consumer<Object, Object> consumer) {
      seen.intercepted.add(String.valueOf(record.value()));
      return record;
    }

    @Override
    public ConsumerRecords<Object, Object> intercept(
        ConsumerRecords<Object, Object> records, Consumer<Object, Object> consumer) {
      records.forEach(record -> seen.intercepted.add(String.valueOf(record.value())));
      return records;
    }
  }

  static class Seen {
    final List<String> intercepted = new CopyOnWriteArrayList<>();
    final List<String> runs = new CopyOnWriteArrayList<>();
  }

  static class HeaderKeyedListeners {
    private final Seen seen;

    HeaderKeyedListeners(Seen seen) {
      this.seen = seen;
    }

    @KafkaListener(id = "kafka-container-interceptor", topics = TOPIC)
    @IdempotentListener(name = "kafka-container-interceptor", header = "Idempotency-Key")
    public void onEvent(String event) {
      seen.runs.add(event);
    }

    @KafkaListener(id = "kafka-container-batch-interceptor", topics = BATCH_TOPIC, batch = "true")
    @IdempotentListener(name = "kafka-container-batch-interceptor", header = "Idempotency-Key")
    public void onEvents(List<String> events) {
      for (String event : events) {
        IdempotentDelivery.context(event); // the element's own key, from its header
        seen.runs.add(event);
      }
    }
  }

  @DynamicPropertySource
  static void kafka(DynamicPropertyRegistry registry) {
    EmbeddedKafka.addProperties(registry);
  }

  @Autowired KafkaTemplate<String, String> template;
  @Autowired Seen seen;

  @Test
  void aHeaderKeyedRecordListenerRunsOnceBehindTheApplicationsOwnInterceptor() throws Exception {
    sendTwiceThenOnce(TOPIC);
  }

  @Test
  void aHeaderKeyedBatchListenerRunsOnceBehindTheApplicationsOwnInterceptor() throws Exception {
    sendTwiceThenOnce(BATCH_TOPIC);
  }

  /**
   * Two records of one key, then one of another key: on one partition, the listener has handled the
   * first two once it ran the last.
   */
  private void sendTwiceThenOnce(String topic) throws Exception {
    String payload = "event-" + UUID.randomUUID();
    String key = "order-" + UUID.randomUUID();
    String last = "last-" + UUID.randomUUID();
    send(topic, payload, key);
    send(topic, payload, key);
    send(topic, last, "order-" + UUID.randomUUID());
    Poll.within(Duration.ofSeconds(30))
        .until("the last record's run", () -> List.copyOf(seen.runs), runs -> runs.contains(last));
    assertThat(seen.intercepted)
        .as("the application's interceptor saw every record")
        .containsSubsequence(payload, payload, last);
    assertThat(seen.runs)
        .as("the header-keyed listener behind the application's own interceptor")
        .containsOnlyOnce(payload)
        .containsSubsequence(payload, last);
  }

  private void send(String topic, String value, String key) throws Exception {
    ProducerRecord<String, String> record = new ProducerRecord<>(topic, value);
    record.headers().add("Idempotency-Key", key.getBytes(StandardCharsets.UTF_8));
    template.send(record).get(30, TimeUnit.SECONDS);
  }
}
