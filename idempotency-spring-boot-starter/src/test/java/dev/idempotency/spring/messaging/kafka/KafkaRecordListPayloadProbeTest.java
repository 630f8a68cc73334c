package dev.idempotency.spring.messaging.kafka;

import static dev.idempotency.spring.messaging.Polling.await;
import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.EmbeddedKafka;
import dev.idempotency.spring.messaging.IdempotentListener;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.listener.CommonErrorHandler;
import org.springframework.kafka.listener.DefaultErrorHandler;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import org.springframework.util.backoff.FixedBackOff;

/**
 * Probe (issue 37, probe45a), {@link dev.idempotency.spring.messaging.jms.JmsListPayloadProbeTest}
 * on Kafka: a record {@code @KafkaListener} (not a batch listener) whose payload is a {@code
 * List<String>} (Spring's conversion service turns the record's comma-separated value into the
 * list), its key in the {@code Idempotency-Key} header. SPEC 15: the listener runs once, with its
 * whole payload, and the record is not recovered (dead-lettered) for a key it has.
 *
 * <p>Real Kafka (KRaft, in this JVM). The application's error handler recovers at once into a list
 * the probe reads, so a record taken for a poison message shows there.
 */
@Tag("open-finding")
@SpringBootTest(
    classes = KafkaRecordListPayloadProbeTest.App.class,
    properties = {
      "spring.kafka.consumer.group-id=idem-probe-record-list",
      "spring.kafka.consumer.auto-offset-reset=earliest"
    })
@DirtiesContext
class KafkaRecordListPayloadProbeTest {

  static final String TOPIC = "idem.probe-record-list";

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  static class App {
    @Bean
    NewTopic probeTopic() {
      return new NewTopic(TOPIC, 1, (short) 1);
    }

    @Bean
    RecordListListener recordListListener() {
      return new RecordListListener();
    }

    /** Recovers a failed record at once, noting its value. */
    @Bean
    CommonErrorHandler errorHandler(RecordListListener listener) {
      return new DefaultErrorHandler(
          (record, failure) -> {
            listener.recovered().add(String.valueOf(record.value()));
            listener.causes().add(rootCause(failure).toString());
          },
          new FixedBackOff(0, 0));
    }
  }

  /** A record listener of a list payload (read through methods: a proxied bean). */
  public static class RecordListListener {
    private final List<List<String>> runs = new CopyOnWriteArrayList<>();
    private final List<String> recovered = new CopyOnWriteArrayList<>();
    private final List<String> causes = new CopyOnWriteArrayList<>();

    public List<String> causes() {
      return causes;
    }

    public List<List<String>> runs() {
      return runs;
    }

    public List<String> recovered() {
      return recovered;
    }

    @KafkaListener(id = "probe-record-list", topics = TOPIC)
    @IdempotentListener(name = "probe-record-list")
    public void onRecord(List<String> lines) {
      runs.add(new ArrayList<>(lines));
    }
  }

  private static Throwable rootCause(Throwable failure) {
    Throwable cause = failure;
    while (cause.getCause() != null && cause.getCause() != cause) {
      cause = cause.getCause();
    }
    return cause;
  }

  @DynamicPropertySource
  static void kafka(DynamicPropertyRegistry registry) {
    EmbeddedKafka.addProperties(registry);
  }

  @Autowired KafkaTemplate<String, String> template;
  @Autowired RecordListListener listener;

  @Test
  void aRecordListenerOfAListPayloadWithAHeaderKeyRunsOnceWithTheWholeList() throws Exception {
    String id = UUID.randomUUID().toString().substring(0, 8);
    String value = "a-" + id + ",b-" + id;
    ProducerRecord<String, String> record = new ProducerRecord<>(TOPIC, value);
    record.headers().add("Idempotency-Key", ("order-" + id).getBytes(StandardCharsets.UTF_8));
    template.send(record).get();

    await(
        "the listener's run, or the record recovered",
        () -> !listener.runs().isEmpty() || listener.recovered().contains(value));
    assertThat(listener.recovered())
        .as("records recovered (dead-lettered), for %s", listener.causes())
        .doesNotContain(value);
    assertThat(listener.runs())
        .as("the listener's runs")
        .containsExactly(List.of("a-" + id, "b-" + id));
  }
}
