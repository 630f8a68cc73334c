package dev.idempotency.spring.messaging.kafka;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.EmbeddedKafka;
import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.testservers.Poll;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.config.ContainerCustomizer;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.listener.ConcurrentMessageListenerContainer;
import org.springframework.kafka.listener.RecordInterceptor;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * probeS (fixcustom; SPEC 1, 15): an application's {@code RecordInterceptor}, set on each container
 * by a {@code ContainerCustomizer}, that replaces each record (a new record whose {@code
 * Idempotency-Key} header is normalized to lower case) and filters some (returns {@code null} for a
 * record with a {@code Skip} header). The starter's interceptor is composed after it, so the
 * listener's key is read from the record the listener gets: two records whose keys differ only in
 * case run once; a filtered record neither runs nor claims its key, so the next record of that key
 * runs. On the shared in-JVM KRaft broker. Passes on Boot 3.5.7 and 4.0.7: a regular test.
 */
@SpringBootTest(
    classes = KafkaInterceptorOrderProbeTest.App.class,
    properties = {
      "spring.kafka.consumer.group-id=idem-interceptor-order",
      "spring.kafka.consumer.auto-offset-reset=earliest"
    })
@DirtiesContext
class KafkaInterceptorOrderProbeTest {

  static final String TOPIC = "idem.interceptor-order";
  static final String KEY = "Idempotency-Key";

  static final List<String> runs = new CopyOnWriteArrayList<>();
  static final List<String> intercepted = new CopyOnWriteArrayList<>();

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  static class App {
    @Bean
    NewTopic interceptorOrderTopic() {
      return new NewTopic(TOPIC, 1, (short) 1);
    }

    @Bean
    HeaderKeyedListener headerKeyedListener() {
      return new HeaderKeyedListener();
    }

    @Bean
    ContainerCustomizer<Object, Object, ConcurrentMessageListenerContainer<Object, Object>>
        normalizing() {
      return container -> container.setRecordInterceptor(new Normalizing());
    }
  }

  /** Filters records with a {@code Skip} header; replaces the others, their key in lower case. */
  static class Normalizing implements RecordInterceptor<Object, Object> {
    @Override
    public ConsumerRecord<Object, Object> intercept(
        ConsumerRecord<Object, Object> record, Consumer<Object, Object> consumer) {
      intercepted.add(String.valueOf(record.value()));
      if (record.headers().lastHeader("Skip") != null) {
        return null;
      }
      RecordHeaders headers = new RecordHeaders();
      for (Header header : record.headers()) {
        byte[] value = header.value();
        if (KEY.equals(header.key())) {
          value =
              new String(value, StandardCharsets.UTF_8)
                  .toLowerCase(Locale.ROOT)
                  .getBytes(StandardCharsets.UTF_8);
        }
        headers.add(header.key(), value);
      }
      return new ConsumerRecord<>(
          record.topic(),
          record.partition(),
          record.offset(),
          record.timestamp(),
          record.timestampType(),
          record.serializedKeySize(),
          record.serializedValueSize(),
          record.key(),
          record.value(),
          headers,
          record.leaderEpoch());
    }
  }

  static class HeaderKeyedListener {
    @KafkaListener(id = "kafka-interceptor-order", topics = TOPIC)
    @IdempotentListener(name = "kafka-interceptor-order", header = KEY)
    public void onEvent(String event) {
      runs.add(event);
    }
  }

  @DynamicPropertySource
  static void kafka(DynamicPropertyRegistry registry) {
    EmbeddedKafka.addProperties(registry);
  }

  @Autowired KafkaTemplate<String, String> template;

  @Test
  void theStartersInterceptorReadsTheRecordTheApplicationsInterceptorReplacedOrFiltered()
      throws Exception {
    String id = UUID.randomUUID().toString();
    String upper = "upper-" + id;
    String lower = "lower-" + id;
    String skipped = "skipped-" + id;
    String after = "after-skip-" + id;
    String last = "last-" + id;
    send(upper, "ORDER-" + id, false);
    send(lower, "order-" + id, false); // the same key once normalized: a repeat
    send(skipped, "other-" + id, true); // filtered by the application: no run, no claim
    send(after, "other-" + id, false); // the filtered record's key: its first run
    send(last, "last-" + id, false);
    Poll.within(Duration.ofSeconds(30))
        .until("the last record's run", () -> List.copyOf(runs), done -> done.contains(last));
    assertThat(intercepted).containsSubsequence(upper, lower, skipped, after, last);
    assertThat(runs)
        .as("runs behind the application's replacing and filtering interceptor")
        .containsExactly(upper, after, last);
  }

  private void send(String value, String key, boolean skip) throws Exception {
    ProducerRecord<String, String> record = new ProducerRecord<>(TOPIC, value);
    record.headers().add(KEY, key.getBytes(StandardCharsets.UTF_8));
    if (skip) {
      record.headers().add("Skip", new byte[] {1});
    }
    template.send(record).get(30, TimeUnit.SECONDS);
  }
}
