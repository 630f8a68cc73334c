package dev.idempotency.spring.messaging;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What becomes of an interrupt that a guarded delivery leaves on a listener container's consumer
 * thread (Kafka's, RabbitMQ's, JMS's).
 *
 * <p>An application's provider client may return from a send with the thread's interrupt status set
 * (the application interrupted it mid-send, and the client finished the send all the same). The
 * guard holds such an interrupt back while it records the outcome and sets it again after, so that
 * the listener's own code still sees it. Once the guarded delivery returns to the container,
 * though, no code of the application's runs on that thread before the next delivery, and the
 * container cannot work on an interrupted thread:
 *
 * <ul>
 *   <li>Kafka's consumer: {@code poll} and {@code commitSync} throw {@code InterruptException} "if
 *       the calling thread is interrupted before or while this function is called" ({@code
 *       KafkaConsumer}'s Javadoc), and that exception sets the interrupt status again as it is
 *       created, so every later poll fails the same way: the container logs "Consumer exception" in
 *       a hot loop and neither commits nor consumes again. A batch listener's offsets are not even
 *       stored for the commit (Spring Kafka's {@code acks.put} gives up on an interrupted thread),
 *       so its messages are never acknowledged. Spring Kafka never interrupts its consumer's thread
 *       itself (it stops a consumer with {@code wakeup()}).
 *   <li>Spring AMQP's {@code SimpleMessageListenerContainer}: the consumer's next wait for a
 *       message throws {@code InterruptedException}, which it takes for a stop: "Stopping container
 *       from aborted consumer", and the listener consumes nothing more until the application
 *       restarts the container. Spring AMQP interrupts its consumers itself only while the
 *       container stops, after its shutdown timeout, when they stop all the same.
 *   <li>Spring's JMS {@code DefaultMessageListenerContainer} on Artemis: the container's next
 *       blocking call fails on it ({@code ActiveMQInterruptedException}): its session commit, after
 *       the starter's own (a failure reported to the container's error handler, the empty
 *       transaction rolled back), the commit of a {@code JmsTransactionManager}, or, on a {@code
 *       CLIENT_ACKNOWLEDGE} session, the acknowledgement or the next receive: the container then
 *       drops its connection and reconnects, and the broker delivers the message again (a replay).
 * </ul>
 *
 * So the interrupt, the application's and meant for a send that is over, is cleared as the delivery
 * returns to the container, with a warning naming the listener (once per listener; then at debug
 * level). An interrupt that comes later (Spring's JMS container interrupts its consumers while it
 * shuts down) is the container's own: JMS's session commit holds it back and sets it again ({@link
 * JmsSessionCommit}). A failed JMS delivery's interrupt is cleared before the container's rollback
 * ({@link #clearBeforeRollback}), also where its listener is not guarded as a record.
 *
 * <p>Thread-safe; used by {@link OutcomesAfterCommit} and {@link ListenerBatches}.
 */
final class ConsumerThreadInterrupts {

  private static final Logger log = LoggerFactory.getLogger(IdempotentListener.class);

  private static final Set<String> WARNED = ConcurrentHashMap.newKeySet();

  private ConsumerThreadInterrupts() {}

  /**
   * Clears an interrupt left on this thread by {@code listener}'s delivery if the delivery came
   * from a Kafka, RabbitMQ or JMS container ({@code delivery}, as bound when it started); elsewhere
   * does nothing.
   */
  static void clearAfterDelivery(@Nullable Delivery delivery, String listener) {
    if (delivery == null || !delivery.onConsumerThread() || !Thread.interrupted()) {
      return;
    }
    String message =
        "Listener {} returned with its consumer thread interrupted (interrupted mid-send); the"
            + " interrupt is cleared before the container acknowledges the delivery: a Kafka"
            + " consumer fails every poll and commit on an interrupted thread, a RabbitMQ"
            + " consumer stops its container, and a JMS container's commit or acknowledgement"
            + " fails";
    warnOnce(message, listener);
  }

  /**
   * Clears an interrupt a JMS listener's failed delivery left on this thread, before Spring's JMS
   * container rolls the session back (so that the broker delivers the message again): a rollback on
   * an interrupted thread fails, and the message was acknowledged instead (a lost send). Warns once
   * per listener class, then at debug level.
   */
  static void clearBeforeRollback(Object listener) {
    if (!Thread.interrupted()) {
      return;
    }
    String name = listener.getClass().getName();
    String message =
        "JMS listener {} failed with its thread interrupted (interrupted mid-send); the interrupt"
            + " is cleared so that the session rolls back and the message is delivered again";
    warnOnce(message, name);
  }

  /** Logs {@code message} about {@code listener} at WARN the first time, then at debug level. */
  private static void warnOnce(String message, String listener) {
    if (WARNED.add(listener)) {
      log.warn(message, listener);
    } else {
      log.debug(message, listener);
    }
  }
}
