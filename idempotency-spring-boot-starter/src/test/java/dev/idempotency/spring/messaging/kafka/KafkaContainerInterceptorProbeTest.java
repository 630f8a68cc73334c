package dev.idempotency.spring.messaging.kafka;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.EmbeddedKafka;
import dev.idempotency.spring.messaging.IdempotentListener;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
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
import org.springframework.kafka.config.ContainerCustomizer;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.listener.ConcurrentMessageListenerContainer;
import org.springframework.kafka.listener.RecordInterceptor;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Probe (issue 37, probeF; SPEC 15): the starter hooks a Kafka record listener through the record
 * interceptor it adds to every container factory ({@code ListenerContainerHooks}); a header key is
 * read from what that interceptor binds. An application that sets its own {@code RecordInterceptor}
 * on each container (a {@code ContainerCustomizer} bean, which Boot applies to its factory, e.g.
 * for tracing) replaces the starter's on the container. A header-keyed {@code @IdempotentListener}
 * must still run once per key: two records of one key, the listener runs once.
 */
@Tag("open-finding")
@SpringBootTest(
    classes = KafkaContainerInterceptorProbeTest.App.class,
    properties = {
      "spring.kafka.consumer.group-id=idem-probe-custom",
      "spring.kafka.consumer.auto-offset-reset=earliest"
    })
@DirtiesContext
class KafkaContainerInterceptorProbeTest {

  static final String TOPIC = "idem.probe-custom";

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  static class App {
    @Bean
    NewTopic probeTopic() {
      return new NewTopic(TOPIC, 1, (short) 1);
    }

    @Bean
    Seen seen() {
      return new Seen();
    }

    @Bean
    ProbeListener probeListener(Seen seen) {
      return new ProbeListener(seen);
    }

    /** The application's own record interceptor, set on each container (tracing, say). */
    @Bean
    ContainerCustomizer<Object, Object, ConcurrentMessageListenerContainer<Object, Object>>
        ownRecordInterceptor(Seen seen) {
      return container ->
          container.setRecordInterceptor(
              (RecordInterceptor<Object, Object>)
                  (record, consumer) -> {
                    seen.intercepted.add(String.valueOf(record.value()));
                    return record;
                  });
    }
  }

  static class Seen {
    final List<String> intercepted = new CopyOnWriteArrayList<>();
    final List<String> runs = new CopyOnWriteArrayList<>();
  }

  static class ProbeListener {
    private final Seen seen;

    ProbeListener(Seen seen) {
      this.seen = seen;
    }

    @KafkaListener(id = "kafka-probe-custom", topics = TOPIC)
    @IdempotentListener(name = "kafka-probe-custom", header = "Idempotency-Key")
    public void onEvent(String event) {
      seen.runs.add(event);
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
    String payload = "event-" + UUID.randomUUID();
    String key = "order-" + UUID.randomUUID();
    for (int i = 0; i < 2; i++) {
      ProducerRecord<String, String> record = new ProducerRecord<>(TOPIC, payload);
      record.headers().add("Idempotency-Key", key.getBytes(StandardCharsets.UTF_8));
      template.send(record).get(30, TimeUnit.SECONDS);
    }
    long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (System.nanoTime() - until < 0 && (seen.runs.isEmpty() || seen.intercepted.size() < 2)) {
      TimeUnit.MILLISECONDS.sleep(50); // bounded polling
    }
    assertThat(seen.intercepted)
        .as("the application's interceptor saw both records")
        .containsExactly(payload, payload);
    assertThat(seen.runs)
        .as("the header-keyed listener behind the application's own record interceptor")
        .containsExactly(payload);
  }
}
