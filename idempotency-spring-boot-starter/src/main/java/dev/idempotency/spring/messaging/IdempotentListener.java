package dev.idempotency.spring.messaging;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Runs a message listener ({@code @KafkaListener}, {@code @RabbitListener}, {@code @JmsListener},
 * record or batch) at most once per key within a window, however often the broker delivers the
 * message, and tells the broker what to do with each delivery:
 *
 * <table>
 *   <caption>per delivery</caption>
 *   <tr><th>the store holds</th><th>the listener</th></tr>
 *   <tr><td>nothing</td><td>runs; its outcome is recorded; the message is acknowledged</td></tr>
 *   <tr><td>a completed record</td><td>does not run; the message is acknowledged (a replay)</td></tr>
 *   <tr><td>a record in flight elsewhere</td><td>does not run; the message comes back later, with
 *       backoff, and is never dead-lettered for that reason</td></tr>
 *   <tr><td>a stored permanent failure</td><td>does not run; acknowledged, or handed to the
 *       broker's dead-letter policy ({@link #storedFailure()})</td></tr>
 *   <tr><td>(the listener throws)</td><td>the key is released; the broker's retry and dead-letter
 *       policy applies unchanged</td></tr>
 *   <tr><td>(the store is down)</td><td>does not run; the message is not acknowledged and comes
 *       back later, with backoff</td></tr>
 * </table>
 *
 * <pre>{@code
 * @KafkaListener(topics = "order-shipped")
 * @IdempotentListener(name = "order-shipped-email", key = "#event.orderId", ttl = "PT72H")
 * public void onOrderShipped(OrderShipped event) {
 *   mail.send(event.email(), "shipped", IdempotentDelivery.context().providerKey());
 * }
 * }</pre>
 *
 * <p><b>The key</b> is never the broker's message id or offset: a producer that publishes the same
 * event twice gives it two. It is {@link #key()}, a SpEL expression over the listener's parameters
 * and the message's headers, or else the message header {@link #header()} (default: property {@code
 * idempotency.messaging.header}, {@code Idempotency-Key}). A key is a stable value: an expression
 * whose value's class does not override {@code toString()} ({@code key = "#event"} on a class
 * without one: {@code Object}'s identity hash, a new key per retry) is refused; strings, numbers,
 * UUIDs, enums, records and classes with their own {@code toString()} are fine. A message whose key
 * cannot be used (missing, blank, too long once namespaced by {@link #name()}, control characters,
 * from {@code Object.toString()}) does not run and is a poison message, an {@link
 * InvalidIdempotencyKeyException}: RabbitMQ rejects it without requeue (to the queue's dead-letter
 * exchange); Spring Kafka's {@code DefaultErrorHandler} does not retry it (its recoverer takes it
 * at once); JMS rolls it back, and the broker's redelivery limit and dead-letter address apply
 * (each redelivery is refused the same way). In a batch, the messages before it run and the
 * container is told of its index (RabbitMQ rejects the whole batch). A key expression that fails in
 * the code it calls (a look-up that timed out) is not one: the message is retried as the listener's
 * failure would be, and a batch is stopped at it the same way (Kafka retries and recovers that
 * message alone; RabbitMQ fails the whole batch with it, once the others ran).
 *
 * <p><b>Batch listeners</b> (a {@code List} parameter of payloads, {@code Message}s or records)
 * claim the keys of a batch together, one round trip per chunk; the listener gets only the messages
 * to send, in order, and {@link #key()} is evaluated per message with the payload as its root
 * object (and as {@code #payload}). A failure is reported as the container expects: Spring Kafka's
 * {@code BatchListenerFailedException} with the index in the batch it polled (a {@code
 * RecordFilterStrategy} may have left the listener fewer messages: each is matched to its record,
 * so it is keyed by its own headers and named where the error handler looks; a record or message by
 * its own identity, a payload by its value object only where no other polled record holds the same
 * object, else a header-keyed delivery is deferred with a WARN to take records or messages). A
 * batch is read only from a {@code List}: Kafka's {@code ConsumerRecords}, or a Kafka batch
 * listener ({@code batch = "true"}, or by its container factory) with no {@code List} parameter,
 * fails the start.
 *
 * <p>RabbitMQ's {@code MANUAL} acknowledgement is not supported (a replay does not run the
 * listener, so nothing would acknowledge it): such a container fails the application at startup.
 * Use {@code AUTO}, the default.
 *
 * <p>Works through a Spring AOP proxy, as {@code @Transactional} does, and runs outside it (the
 * advisor's order is {@link IdempotentListenerAdvisor#DEFAULT_ORDER}): on a listener that is also
 * {@code @Transactional} an outcome is recorded only after the commit succeeded, and a failed
 * commit releases the key; an application whose transaction advisor is ordered outside the guard
 * fails at startup. The provider key of a send is {@link IdempotentDelivery#context()}'s.
 *
 * <p><b>Container transactions.</b> Where the listener container commits a transaction after the
 * listener returned, the outcome waits for that commit: recorded once it committed, released if it
 * rolled back or its commit failed, so that the broker's redelivery runs the listener again (and
 * redoes its transactional work) instead of being acknowledged as a replay. The key stays claimed,
 * its lease renewed, meanwhile.
 *
 * <ul>
 *   <li>Kafka with a transaction manager on the container (Spring Boot sets its {@code
 *       KafkaTransactionManager} with {@code spring.kafka.producer.transaction-id-prefix}): the
 *       starter wraps it, and the outcome waits for the container's transaction (the consumer
 *       offsets and the records the listener produced); record and batch listeners.
 *   <li>JMS with a transacted session (Spring Boot's default, with no transaction manager; also
 *       with a {@code JmsTransactionManager}): the session is committed as soon as the listener
 *       returned (its acknowledgement and what the listener sent in it), then the outcome is
 *       recorded; a commit that fails releases the key and reaches the container, which rolls back.
 *   <li>Any Spring-managed transaction with synchronization active around the listener (JTA, a JDBC
 *       or JPA transaction manager): that transaction.
 *   <li>Refused at startup: RabbitMQ's {@code channelTransacted} (with or without a {@code
 *       RabbitTransactionManager}, which, like Spring's Kafka and JMS ones, activates no
 *       synchronization): Spring AMQP commits the channel after the listener with nothing the
 *       starter can wait on, so the outcome would be recorded before a commit that may fail.
 * </ul>
 */
@Target(ElementType.METHOD)
@Retention(RetentionPolicy.RUNTIME)
@Documented
public @interface IdempotentListener {

  /** The header a producer sets by default: {@value}. */
  String DEFAULT_HEADER = "Idempotency-Key";

  /**
   * The key: a SpEL expression over the listener's parameters ({@code #event.orderId}, {@code
   * #p0.id}) and the message's headers ({@code #headers['x-order-id']}); in a batch listener over
   * each message's payload ({@code orderId}, {@code #payload.orderId}). Empty: the key is the
   * header {@link #header()}.
   *
   * @return the expression, or empty
   */
  String key() default "";

  /**
   * The message header that carries the key when {@link #key()} is empty. Empty: property {@code
   * idempotency.messaging.header}, default {@value #DEFAULT_HEADER}.
   *
   * @return the header name, or empty for the default
   */
  String header() default "";

  /**
   * The namespace of the key and the operation in events, metrics and logs; default the class's
   * simple name and the method's, {@code OrderMailer.onOrderShipped}. Two different listeners whose
   * default names are equal ({@code email.OrderShippedListener.onMessage} and {@code
   * sms.OrderShippedListener.onMessage}) fail the application at startup, both named: they would
   * share one key namespace, and one's delivery would be acknowledged as the other's replay without
   * being sent. Give each its own name.
   *
   * @return the name, or empty for the default
   */
  String name() default "";

  /**
   * The window, in Spring Boot's duration formats ({@code PT72H}, {@code 72h}); default {@code
   * idempotency.operations.<name>.ttl}, else {@code idempotency.default-ttl}. A window not longer
   * than the guard's lease ({@code idempotency.lease}) fails the application at startup, naming the
   * listener, its window and the lease.
   *
   * @return the ttl, or empty for the default
   */
  String ttl() default "";

  /**
   * What a delivery whose key failed permanently before gets; default property {@code
   * idempotency.messaging.stored-failure} ({@code acknowledge}).
   *
   * @return the choice
   */
  StoredFailure storedFailure() default StoredFailure.DEFAULT;

  /** What becomes of a delivery whose key holds a stored permanent failure. */
  enum StoredFailure {
    /** As property {@code idempotency.messaging.stored-failure} says. */
    DEFAULT,
    /** Acknowledged without running the listener (counted as {@code failure_replayed}). */
    ACKNOWLEDGE,
    /**
     * Refused with the stored failure, so that the broker's dead-letter policy takes it (RabbitMQ:
     * rejected without requeue; Kafka: the error handler's recoverer; JMS: redelivered until the
     * broker's maximum delivery attempts, then its dead-letter address).
     */
    DEAD_LETTER
  }
}
