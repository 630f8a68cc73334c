package dev.idempotency.spring.messaging;

import dev.idempotency.spring.IdempotencyConfigurationException;
import java.lang.annotation.Annotation;
import java.lang.reflect.Method;
import java.lang.reflect.Parameter;
import java.util.List;
import java.util.Set;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.core.annotation.AnnotationUtils;
import org.springframework.util.ClassUtils;

/**
 * Where an {@link IdempotentListener} method takes its batch, for {@link ListenerMethod}: the first
 * {@code List} parameter that is not a header, unless the method is a {@code @JmsListener} (JMS has
 * no batch listeners). At run time a delivery that the container hands out as one message runs as a
 * record delivery whatever the method takes (a Kafka or RabbitMQ record listener of a {@code List}
 * payload). A batch in another shape that Spring Kafka accepts fails the start: run as a record
 * listener, it would find no key and dead-letter every message unsent. Kafka and Spring Kafka
 * classes are compared by name, so that neither must be present.
 */
final class BatchParameters {

  private static final String CONSUMER_RECORDS =
      "org.apache.kafka.clients.consumer.ConsumerRecords";
  private static final String KAFKA_LISTENER = "org.springframework.kafka.annotation.KafkaListener";
  private static final Set<String> JMS_LISTENERS =
      Set.of(
          "org.springframework.jms.annotation.JmsListener",
          "org.springframework.jms.annotation.JmsListeners");
  private static final Set<String> BATCHING_LISTENERS =
      Set.of(
          KAFKA_LISTENER,
          "org.springframework.kafka.annotation.KafkaListeners",
          "org.springframework.amqp.rabbit.annotation.RabbitListener",
          "org.springframework.amqp.rabbit.annotation.RabbitListeners");

  private BatchParameters() {}

  /**
   * The index of the method's batch parameter, or -1 for a record listener.
   *
   * @param where the annotation and method, for the message
   * @throws IllegalStateException if the method takes its batch in a shape the starter cannot read
   *     message by message: Kafka's {@code ConsumerRecords}, or no {@code List} in a listener that
   *     {@code @KafkaListener(batch = "true")} makes a batch listener (a {@code Collection}, an
   *     {@code Iterable}, ...)
   */
  static int indexOf(String where, Method method) {
    if (isJmsListenerOnly(method)) {
      return -1;
    }
    Parameter[] parameters = method.getParameters();
    int batch = -1;
    for (int i = 0; i < parameters.length; i++) {
      if (isKafkaConsumerRecords(parameters[i].getType())) {
        throw new IdempotencyConfigurationException(
            where
                + " takes its batch as Kafka's "
                + parameters[i].getType().getSimpleName()
                + ", which the starter cannot hand out message by message (each message's key,"
                + " lease check and failure index).",
            "Take the batch as List<ConsumerRecord<K, V>> (or List<Message<?>>, or a List of"
                + " payloads).");
      }
      if (batch < 0
          && List.class.isAssignableFrom(parameters[i].getType())
          && !isHeader(parameters[i])) {
        batch = i;
      }
    }
    if (batch < 0 && declaresKafkaBatch(method)) {
      throw new IdempotencyConfigurationException(
          where
              + " is a batch listener (@KafkaListener(batch = \"true\")) with no List parameter"
              + " to take its batch: the starter reads a batch only from a List.",
          "Take the batch as a List (List<ConsumerRecord<K, V>>, List<Message<?>> or a List of"
              + " payloads), or make it a record listener.");
    }
    return batch;
  }

  /**
   * Refuses a method that its container factory makes a batch listener (Spring Kafka's {@code
   * batchListener}, Boot's {@code spring.kafka.listener.type=batch}) while it takes no {@code
   * List}: what {@link #indexOf} cannot see from the method alone.
   *
   * @param method a listener endpoint's method
   * @throws IllegalStateException naming the method, if it is an {@link IdempotentListener} with no
   *     batch parameter
   */
  static void checkBatchListener(Method method) {
    if (!AnnotatedElementUtils.hasAnnotation(method, IdempotentListener.class)) {
      return;
    }
    String where =
        "@IdempotentListener on "
            + ClassUtils.getUserClass(method.getDeclaringClass()).getName()
            + "."
            + method.getName()
            + "(..)";
    if (indexOf(where, method) < 0) {
      throw new IdempotencyConfigurationException(
          where
              + " is a batch listener (its container factory is one, such as Boot's"
              + " spring.kafka.listener.type=batch) with no List parameter to take its batch: the"
              + " starter reads a batch only from a List.",
          "Take the batch as a List (List<ConsumerRecord<K, V>>, List<Message<?>> or a List of"
              + " payloads), or give this listener a container factory that is not a batch"
              + " one.");
    }
  }

  /**
   * Whether the method is a {@code @JmsListener} and no Kafka or RabbitMQ listener: JMS has no
   * batch listeners, so a {@code List} parameter is its payload (a JSON array, say).
   */
  private static boolean isJmsListenerOnly(Method method) {
    boolean jms = false;
    for (Annotation annotation : method.getAnnotations()) {
      String name = annotation.annotationType().getName();
      if (BATCHING_LISTENERS.contains(name)) {
        return false;
      }
      jms |= JMS_LISTENERS.contains(name);
    }
    return jms;
  }

  /** Whether {@code type} is (or extends) Kafka's {@code ConsumerRecords}. */
  private static boolean isKafkaConsumerRecords(Class<?> type) {
    for (Class<?> each = type; each != null; each = each.getSuperclass()) {
      if (each.getName().equals(CONSUMER_RECORDS)) {
        return true;
      }
    }
    return false;
  }

  /**
   * Whether the method's {@code @KafkaListener} says {@code batch = "true"} (a literal; a
   * placeholder or the factory's default is not known here).
   */
  private static boolean declaresKafkaBatch(Method method) {
    for (Annotation annotation : method.getAnnotations()) {
      if (annotation.annotationType().getName().equals(KAFKA_LISTENER)) {
        return "true".equals(AnnotationUtils.getValue(annotation, "batch"));
      }
    }
    return false;
  }

  private static boolean isHeader(Parameter parameter) {
    for (Annotation annotation : parameter.getAnnotations()) {
      String simpleName = annotation.annotationType().getSimpleName();
      if (simpleName.equals("Header") || simpleName.equals("Headers")) {
        return true;
      }
    }
    return false;
  }
}
