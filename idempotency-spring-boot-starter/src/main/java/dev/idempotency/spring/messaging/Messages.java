package dev.idempotency.spring.messaging;

import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.Header;
import org.jspecify.annotations.Nullable;
import org.springframework.util.ClassUtils;

/**
 * Payloads and headers of the messages listeners get, whatever the broker: a Spring {@code
 * Message}, a Kafka {@code ConsumerRecord}, or a plain payload. Each broker class is touched only
 * where it is on the classpath.
 */
final class Messages {

  private static final boolean MESSAGING =
      ClassUtils.isPresent(
          "org.springframework.messaging.Message", Messages.class.getClassLoader());
  private static final boolean KAFKA =
      ClassUtils.isPresent(
          "org.apache.kafka.clients.consumer.ConsumerRecord", Messages.class.getClassLoader());

  private static final boolean KAFKA_MESSAGING =
      MESSAGING
          && KAFKA
          && ClassUtils.isPresent(
              "org.springframework.kafka.support.KafkaHeaders", Messages.class.getClassLoader());

  private static final boolean KAFKA_ACK =
      ClassUtils.isPresent(
          "org.springframework.kafka.support.Acknowledgment", Messages.class.getClassLoader());

  private Messages() {}

  /** The payload of a listener's argument: a message's payload, a record's value, or itself. */
  static @Nullable Object payloadOf(@Nullable Object element) {
    if (element == null) {
      return null;
    }
    if (MESSAGING && element instanceof org.springframework.messaging.Message<?> message) {
      return message.getPayload();
    }
    if (KAFKA && element instanceof ConsumerRecord<?, ?> record) {
      return record.value();
    }
    return element;
  }

  /**
   * Whether a listener's {@code element} is the polled {@code record}: the record itself, or a
   * Spring message built from it (the same topic, partition and offset). Never by value: two
   * records may share one value object.
   */
  static boolean isMessageOf(Object element, Object record) {
    if (element == record) {
      return true;
    }
    if (KAFKA_MESSAGING
        && element instanceof org.springframework.messaging.Message<?> message
        && record instanceof ConsumerRecord<?, ?> polled) {
      Map<String, Object> headers = message.getHeaders();
      return Long.valueOf(polled.offset())
              .equals(headers.get(org.springframework.kafka.support.KafkaHeaders.OFFSET))
          && Integer.valueOf(polled.partition())
              .equals(
                  headers.get(org.springframework.kafka.support.KafkaHeaders.RECEIVED_PARTITION))
          && polled
              .topic()
              .equals(headers.get(org.springframework.kafka.support.KafkaHeaders.RECEIVED_TOPIC));
    }
    return false;
  }

  /** The headers an argument carries itself (a Spring message, a Kafka record), or none. */
  static @Nullable Map<String, Object> headersOf(@Nullable Object element) {
    if (MESSAGING && element instanceof org.springframework.messaging.Message<?> message) {
      return message.getHeaders();
    }
    if (KAFKA && element instanceof ConsumerRecord<?, ?> record) {
      return kafkaHeaders(record);
    }
    return null;
  }

  /**
   * Acknowledges a delivery that the listener did not run for (a replay), where the listener takes
   * Spring Kafka's {@code Acknowledgment} (manual acknowledgement): the listener would have.
   */
  static void acknowledgeSkipped(Object[] arguments) {
    if (!KAFKA_ACK) {
      return;
    }
    for (Object argument : arguments) {
      if (argument instanceof org.springframework.kafka.support.Acknowledgment acknowledgment) {
        acknowledgment.acknowledge();
      }
    }
  }

  /**
   * Replaces a batch listener's Spring Kafka {@code Acknowledgment} argument (manual
   * acknowledgement) with one the starter holds ({@link HeldAcknowledgment}), for a list of {@code
   * size} messages whose polled indexes are {@code polledIndex}; {@code null} where the listener
   * takes none.
   */
  static @Nullable HeldAcknowledgment holdAcknowledgment(
      Object[] arguments, int size, java.util.function.IntUnaryOperator polledIndex) {
    if (!KAFKA_ACK) {
      return null;
    }
    for (int i = 0; i < arguments.length; i++) {
      if (arguments[i] instanceof org.springframework.kafka.support.Acknowledgment container) {
        return new KafkaDeliveries.HeldBatchAcknowledgment(
            arguments, i, container, size, polledIndex);
      }
    }
    return null;
  }

  /**
   * Replaces a record listener's Spring Kafka {@code Acknowledgment} argument (manual
   * acknowledgement) with one whose nack the starter holds ({@link HeldNack}); {@code null} where
   * the listener takes none.
   */
  static @Nullable HeldNack holdNack(Object[] arguments) {
    if (!KAFKA_ACK) {
      return null;
    }
    for (int i = 0; i < arguments.length; i++) {
      if (arguments[i] instanceof org.springframework.kafka.support.Acknowledgment container) {
        return new KafkaDeliveries.HeldRecordAcknowledgment(arguments, i, container);
      }
    }
    return null;
  }

  /**
   * A polled Kafka record's topic, partition and offset (which its redeliveries keep), or {@code
   * null} for anything else.
   */
  static @Nullable String recordId(@Nullable Object polled) {
    return KAFKA && polled instanceof ConsumerRecord<?, ?> record
        ? record.topic() + '-' + record.partition() + '@' + record.offset()
        : null;
  }

  /** A Kafka record's headers, the last value of each name. */
  static Map<String, Object> kafkaHeaders(ConsumerRecord<?, ?> record) {
    Map<String, Object> headers = new LinkedHashMap<>();
    for (Header header : record.headers()) {
      headers.put(header.key(), header.value());
    }
    return headers;
  }

  /**
   * A header's value as text: byte arrays (Kafka) are UTF-8; JMS property names cannot hold a
   * hyphen, so {@code Idempotency-Key} is also looked up as {@code Idempotency_Key}.
   */
  static @Nullable String header(Map<String, Object> headers, String name) {
    Object value = headers.get(name);
    if (value == null && name.indexOf('-') >= 0) {
      value = headers.get(name.replace('-', '_'));
    }
    if (value == null) {
      return null;
    }
    return value instanceof byte[] bytes
        ? new String(bytes, StandardCharsets.UTF_8)
        : value.toString();
  }
}
