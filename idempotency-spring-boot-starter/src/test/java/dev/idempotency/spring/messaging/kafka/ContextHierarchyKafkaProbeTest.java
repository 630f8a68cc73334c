package dev.idempotency.spring.messaging.kafka;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.EmbeddedKafka;
import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.testservers.Poll;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.junit.jupiter.api.Test;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.kafka.annotation.EnableKafka;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.core.KafkaTemplate;

/**
 * probeS (fixhier; SPEC 1, 15): a child context built with {@code SpringApplicationBuilder.child},
 * with its own {@code @EnableKafka} and a header-keyed {@code @IdempotentListener} on the PARENT's
 * container factory (Boot's {@code kafkaListenerContainerFactory}, which the child does not define
 * again): the container is built by the parent's factory (the parent's hooks), started by the
 * child's registry, and its listener bean proxied by the child's advisor on the parent's guard. One
 * key sent twice, then another key: handled once each. On the shared in-JVM KRaft broker. Passes on
 * Boot 3.5.7 and 4.0.7: a regular test.
 */
class ContextHierarchyKafkaProbeTest {

  static final String TOPIC = "idem.child-kafka";
  static final List<String> HANDLED = new CopyOnWriteArrayList<>();

  /** The parent: Kafka, the starter, the guard, Boot's container factory. */
  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  static class ParentApp {
    @Bean
    NewTopic childKafkaTopic() {
      return new NewTopic(TOPIC, 1, (short) 1);
    }
  }

  /** The child: its listener, on the parent's factory. */
  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @EnableKafka // Boot's own @EnableKafka backs off when the parent has one
  static class ChildApp {
    @Bean
    ChildListener childListener() {
      return new ChildListener();
    }
  }

  static class ChildListener {
    @KafkaListener(id = "child-kafka", topics = TOPIC, groupId = "idem-child-kafka")
    @IdempotentListener(name = "child-kafka", header = "Idempotency-Key")
    public void onEvent(String event) {
      HANDLED.add(event);
    }
  }

  @Test
  void aChildsHeaderKeyedKafkaListenerOnTheParentsFactoryHandlesOneKeyOnce() throws Exception {
    ConfigurableApplicationContext child =
        new SpringApplicationBuilder(ParentApp.class)
            .web(WebApplicationType.NONE)
            .child(ChildApp.class)
            .web(WebApplicationType.NONE)
            .run(
                "--spring.kafka.bootstrap-servers=" + EmbeddedKafka.bootstrapServers(),
                "--spring.kafka.consumer.auto-offset-reset=earliest",
                "--idempotency.store=memory",
                "--idempotency.in-flight-wait=50ms",
                "--idempotency.messaging.back-off.initial=50ms",
                "--idempotency.messaging.back-off.max=300ms",
                "--spring.main.banner-mode=off");
    ConfigurableApplicationContext parent = (ConfigurableApplicationContext) child.getParent();
    try (parent;
        child) {
      @SuppressWarnings("unchecked")
      KafkaTemplate<String, String> template = parent.getBean(KafkaTemplate.class);
      String id = UUID.randomUUID().toString();
      String first = "first-" + id;
      String repeat = "repeat-" + id;
      String last = "last-" + id;
      send(template, first, "order-" + id);
      send(template, repeat, "order-" + id); // a redelivery of one event, another payload
      send(template, last, "other-" + id);
      Poll.within(Duration.ofSeconds(60))
          .until("the last record's run", () -> List.copyOf(HANDLED), done -> done.contains(last));
      assertThat(HANDLED).containsExactly(first, last);
    }
  }

  private static void send(KafkaTemplate<String, String> template, String value, String key)
      throws Exception {
    ProducerRecord<String, String> record = new ProducerRecord<>(TOPIC, value);
    record.headers().add("Idempotency-Key", key.getBytes(StandardCharsets.UTF_8));
    template.send(record).get(30, TimeUnit.SECONDS);
  }
}
