package dev.idempotency.spring.messaging;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.lang.reflect.Method;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.junit.jupiter.api.Test;
import org.springframework.core.DefaultParameterNameDiscoverer;
import org.springframework.expression.spel.standard.SpelExpressionParser;
import org.springframework.kafka.annotation.KafkaListener;

/**
 * The batch shapes an {@link IdempotentListener} is checked for when its bean is proxied (no broker
 * needed: this is the start-up check itself; {@code KafkaConsumerRecordsBatchTest} shows the start
 * of a real application failing). A batch is read only from a {@code List}: Kafka's {@code
 * ConsumerRecords}, or a {@code @KafkaListener(batch = "true")} method with no {@code List}
 * parameter, would run as a record listener, find no key and dead-letter every message unsent.
 */
class ListenerMethodBatchShapeTest {

  @Test
  void aConsumerRecordsParameterFailsTheStartNamingTheMethodAndTheShapeToTake() {
    assertThatThrownBy(() -> of("records"))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining(Listeners.class.getName() + ".records(..)")
        .hasMessageContaining("takes its batch as Kafka's ConsumerRecords")
        .hasMessageContaining("List<ConsumerRecord<K, V>>");
  }

  @Test
  void aDeclaredBatchListenerWithNoListParameterFailsTheStart() {
    assertThatThrownBy(() -> of("collection"))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining(Listeners.class.getName() + ".collection(..)")
        .hasMessageContaining("batch = \"true\"")
        .hasMessageContaining("no List parameter");
  }

  @Test
  void aListIsTheBatchAndARecordListenerMayTakeACollectionPayload() {
    assertThat(of("list").batchIndex).isZero();
    assertThat(of("oneRecord").batchIndex).isEqualTo(-1);
  }

  @Test
  void aParameterNameKeyOnAListMethodFailsTheStartSayingWhyForRecordListenersToo() {
    // a record @KafkaListener of a List payload: the method alone cannot tell it from a batch
    // listener, so the parameter's name is refused, and the message must not call it a batch
    // listener outright but say how to key both kinds
    assertThatThrownBy(() -> of("lines"))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining(Listeners.class.getName() + ".lines(..)")
        .hasMessageContaining("#lines is not known when the method gets a batch")
        .hasMessageContaining("a method that takes a List is read as a batch listener")
        .hasMessageContaining(
            "a record listener of a List payload too (#payload is then the whole list)");
    assertThat(of("linesByPayload").batchIndex).isZero();
  }

  @Test
  void theKeyReadsHeadersWhenItIsAHeaderOrAnExpressionOverHeaders() {
    assertThat(of("list").keyReadsHeaders).as("header key").isTrue();
    assertThat(of("headerExpression").keyReadsHeaders).as("#headers").isTrue();
    assertThat(of("payloadExpression").keyReadsHeaders).as("payload key").isFalse();
  }

  private static ListenerMethod of(String name) {
    Method method = null;
    for (Method each : Listeners.class.getDeclaredMethods()) {
      if (each.getName().equals(name)) {
        method = each;
      }
    }
    if (method == null) {
      throw new IllegalArgumentException("no method " + name);
    }
    return ListenerMethod.of(
        method,
        Listeners.class,
        method.getAnnotation(IdempotentListener.class),
        "Idempotency-Key",
        true,
        new SpelExpressionParser(),
        new DefaultParameterNameDiscoverer(),
        operation -> Duration.ofHours(1),
        Duration.ofSeconds(30));
  }

  /** Listener methods of each shape; never run. */
  static class Listeners {
    @KafkaListener(topics = "t", batch = "true")
    @IdempotentListener(name = "records")
    void records(ConsumerRecords<String, String> records) {}

    @KafkaListener(topics = "t", batch = "true")
    @IdempotentListener(name = "collection")
    void collection(Collection<String> payloads) {}

    @KafkaListener(topics = "t", batch = "true")
    @IdempotentListener(name = "list")
    void list(List<String> payloads) {}

    @KafkaListener(topics = "t")
    @IdempotentListener(name = "one-record", key = "#payload[0]")
    void oneRecord(Collection<String> payload) {}

    @KafkaListener(topics = "t")
    @IdempotentListener(name = "lines", key = "#lines")
    void lines(List<String> lines) {}

    @KafkaListener(topics = "t")
    @IdempotentListener(name = "lines-by-payload", key = "#payload")
    void linesByPayload(List<String> lines) {}

    @KafkaListener(topics = "t", batch = "true")
    @IdempotentListener(name = "header-expression", key = "#headers['x-order']")
    void headerExpression(List<String> payloads) {}

    @KafkaListener(topics = "t", batch = "true")
    @IdempotentListener(name = "payload-expression", key = "#payload")
    void payloadExpression(List<String> payloads) {}
  }
}
