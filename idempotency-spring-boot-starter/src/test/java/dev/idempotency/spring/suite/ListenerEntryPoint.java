package dev.idempotency.spring.suite;

import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.util.List;
import java.util.concurrent.CountDownLatch;

/**
 * A listener entry point of the suite, whose caller is the broker: "called with a key" is a message
 * published with that key in its {@code Idempotency-Key} header; its answer is what became of the
 * delivery (consumed and acknowledged, redelivered, or dead-lettered); the sends are counted by the
 * {@link SuiteProvider} behind it, as behind the {@link EntryPoint HTTP entry points}.
 *
 * <p>Implemented: the Kafka record and batch listeners (on the messaging tests' shared in-JVM
 * broker), the JMS listener (on an embedded Artemis of its application's own) and the RabbitMQ
 * listener (on the messaging tests' shared server).
 */
public enum ListenerEntryPoint {
  /** A Kafka {@code @KafkaListener} record listener. */
  KAFKA_RECORD(SuiteKafkaApplication.LISTENER, KafkaListenerApplication::record),
  /** A Kafka batch listener ({@code @KafkaListener(batch = "true")}). */
  KAFKA_BATCH(SuiteKafkaApplication.BATCH_LISTENER, KafkaListenerApplication::batch),
  /** A JMS {@code @JmsListener} (transacted session, the broker's redelivery). */
  JMS(SuiteJmsApplication.LISTENER, JmsListenerApplication::start),
  /** A RabbitMQ {@code @RabbitListener} (Boot's defaults: a failed delivery is requeued). */
  RABBIT(SuiteRabbitApplication.LISTENER, RabbitListenerApplication::start);

  /** How an entry point's application is started. */
  @FunctionalInterface
  interface Starter {
    ListenerApplication start(
        SwitchableKeyStore store,
        SuiteProvider provider,
        CountDownLatch closing,
        String destination);
  }

  private final String operation;
  private final Starter starter;
  private ListenerApplication shared;

  ListenerEntryPoint(String operation, Starter starter) {
    this.operation = operation;
    this.starter = starter;
  }

  /** The listener's name: the namespace of its keys and the operation of its events. */
  public String operation() {
    return operation;
  }

  /**
   * This entry point's shared application, on the suite's shared store and provider ({@link
   * Stack#STORE}, {@link Stack#PROVIDER}), started on first use and closed as the JVM ends.
   */
  public synchronized ListenerApplication shared() {
    if (shared == null) {
      shared =
          start(
              Stack.STORE,
              Stack.PROVIDER,
              new CountDownLatch(1),
              "idem.suite.shared-" + name().toLowerCase(java.util.Locale.ROOT));
    }
    return shared;
  }

  /**
   * Starts an application of this entry point on {@code store} and {@code provider}, consuming
   * {@code destination} (a topic of its own, and its consumer group); {@code closing} is counted
   * down when its shutdown begins.
   */
  public ListenerApplication start(
      SwitchableKeyStore store,
      SuiteProvider provider,
      CountDownLatch closing,
      String destination) {
    return starter.start(store, provider, closing, destination);
  }

  /** Every listener entry point of the suite. */
  static List<ListenerEntryPoint> all() {
    return List.of(values());
  }
}
