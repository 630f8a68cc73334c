package dev.idempotency.spring.messaging;

import static org.assertj.core.api.Assertions.assertThat;

import java.lang.reflect.Method;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.springframework.core.DefaultParameterNameDiscoverer;
import org.springframework.expression.spel.standard.SpelExpressionParser;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.messaging.MessageHeaders;
import org.springframework.messaging.handler.annotation.Header;
import org.springframework.messaging.handler.annotation.Headers;

/**
 * The header arguments of a batch listener cut down to the messages handed out, the helper alone
 * (no broker: {@code KafkaBatchHeaderListAlignmentProbeTest} runs it on a real Kafka batch): a
 * {@code @Header} list, a {@code @Header} array (object or primitive; Spring converted the list)
 * and each list of a {@code @Headers} map keep the entries of the kept indexes, other values as
 * they are; a list or an array of another length than the batch is passed as it is; {@code restore}
 * puts the container's arguments back.
 */
class BatchHeaderArgumentsTest {

  @Test
  void headerListsAndTheHeadersMapsListsKeepTheEntriesOfTheMessagesHandedOut() {
    ListenerMethod method = of();
    MessageHeaders headers =
        new MessageHeaders(Map.of("kafka_receivedMessageKey", List.of("ra", "rb", "rc"), "g", "x"));
    List<String> keys = List.of("ra", "rb", "rc");
    Object[] arguments = {List.of("a", "b", "c"), keys, headers, "other"};

    Object[] originals = BatchHeaderArguments.align(method, arguments, 3, List.of(1, 2));

    assertThat(arguments[1]).isEqualTo(List.of("rb", "rc"));
    assertThat(arguments[2]).isInstanceOf(MessageHeaders.class);
    MessageHeaders aligned = (MessageHeaders) arguments[2];
    assertThat(aligned.get("kafka_receivedMessageKey")).isEqualTo(List.of("rb", "rc"));
    assertThat(aligned.get("g")).isEqualTo("x");
    assertThat(aligned.getId()).isEqualTo(headers.getId());
    assertThat(arguments[3]).isEqualTo("other");

    BatchHeaderArguments.restore(arguments, originals, method.batchIndex);
    assertThat(arguments[1]).isSameAs(keys);
    assertThat(arguments[2]).isSameAs(headers);
  }

  @Test
  void aListOfAnotherLengthThanTheBatchIsPassedAsItIs() {
    // Spring Kafka's conversion failures: empty where none failed, never one entry per message
    ListenerMethod method = of();
    List<String> keys = List.of("ra", "rb");
    MessageHeaders headers =
        new MessageHeaders(
            Map.of("kafka_conversionFailures", List.of(), "kafka_offset", List.of(1L, 2L, 3L)));
    Object[] arguments = {List.of("a", "b", "c"), keys, headers, "other"};

    BatchHeaderArguments.align(method, arguments, 3, List.of(1));

    assertThat(arguments[1]).isSameAs(keys);
    MessageHeaders aligned = (MessageHeaders) arguments[2];
    assertThat(aligned.get("kafka_conversionFailures")).isEqualTo(List.of());
    assertThat(aligned.get("kafka_offset")).isEqualTo(List.of(2L));
  }

  @Test
  void headerArraysKeepTheEntriesOfTheMessagesHandedOutInArraysOfTheirType() {
    ListenerMethod method = of("arrays", List.class, String[].class, long[].class, String[].class);
    String[] keys = {"ra", "rb", "rc"};
    long[] offsets = {1L, 2L, 3L};
    String[] groups = {"g"};
    Object[] arguments = {List.of("a", "b", "c"), keys, offsets, groups};

    Object[] originals = BatchHeaderArguments.align(method, arguments, 3, List.of(0, 2));

    assertThat(arguments[1]).isInstanceOf(String[].class);
    assertThat((String[]) arguments[1]).containsExactly("ra", "rc");
    assertThat(arguments[2]).isInstanceOf(long[].class);
    assertThat((long[]) arguments[2]).containsExactly(1L, 3L);
    // another length than the batch: never one entry per message
    assertThat(arguments[3]).isSameAs(groups);
    assertThat(keys).containsExactly("ra", "rb", "rc");

    BatchHeaderArguments.restore(arguments, originals, method.batchIndex);
    assertThat(arguments[1]).isSameAs(keys);
    assertThat(arguments[2]).isSameAs(offsets);
  }

  private static ListenerMethod of() {
    return of("batch", List.class, List.class, Map.class, String.class);
  }

  private static ListenerMethod of(String name, Class<?>... parameterTypes) {
    Method method;
    try {
      method = Listeners.class.getDeclaredMethod(name, parameterTypes);
    } catch (NoSuchMethodException e) {
      throw new IllegalStateException(e);
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

  /** Batch listeners with header lists, arrays, a headers map and another parameter; never run. */
  static class Listeners {
    @KafkaListener(topics = "t", batch = "true")
    @IdempotentListener(name = "header-lists")
    void batch(
        List<String> payloads,
        @Header("kafka_receivedMessageKey") List<String> keys,
        @Headers Map<String, Object> headers,
        String other) {}

    @KafkaListener(topics = "t", batch = "true")
    @IdempotentListener(name = "header-arrays")
    void arrays(
        List<String> payloads,
        @Header("kafka_receivedMessageKey") String[] keys,
        @Header("kafka_offset") long[] offsets,
        @Header("kafka_groupId") String[] groups) {}
  }
}
