package dev.idempotency.spring.messaging;

import java.util.ArrayDeque;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.jspecify.annotations.Nullable;
import org.springframework.kafka.core.KafkaResourceHolder;
import org.springframework.kafka.core.ProducerFactory;
import org.springframework.kafka.transaction.KafkaAwareTransactionManager;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.TransactionDefinition;
import org.springframework.transaction.TransactionException;
import org.springframework.transaction.TransactionStatus;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * A listener container's transaction manager, wrapped so that {@link ContainerTransactions} learns
 * when the container's transaction ended and how: Spring Kafka's {@code KafkaTransactionManager}
 * (like Spring's JMS and RabbitMQ ones) never activates transaction synchronization, so nothing
 * else tells a listener's advice that the container's commit succeeded. Each new transaction it
 * begins opens a local transaction on the thread; its commit then completes what waits on it
 * (recorded), and a rollback or a commit that fails completes it as rolled back (released).
 * Everything else is the wrapped manager's. Installed by {@link ListenerContainerHooks} on each
 * Spring Kafka listener container before it starts.
 *
 * <p>A Kafka batch that stopped partway may have its transaction commit the consumer offsets only
 * up to the stop ({@link #commitOffsetsAt}): those are sent to the transaction last, just before
 * its commit, after the offsets of the whole batch the container sent. If that transaction then
 * does not commit after all (the producer refused a dead letter in it, which leaves it unable to
 * commit), the records before the stop are recorded rather than released: they were sent, and their
 * redelivery must be a replay; except those whose records the listener produced in that transaction
 * ({@link KafkaTransactionSends}, {@link TransactionProduces}), whose abort undid them: those are
 * released and produced again.
 */
class ContainerTransactionManager implements PlatformTransactionManager {

  /** The local transactions this thread's managers opened, innermost first. */
  private static final ThreadLocal<Deque<Opened>> OPENED = ThreadLocal.withInitial(ArrayDeque::new);

  /** A transaction this thread's manager opened, and the offsets its commit must end at. */
  private static final class Opened {
    final TransactionStatus status;
    final @Nullable List<ContainerTransactions.Completion> outer;
    final @Nullable KafkaAware<?, ?> kafka;

    /** The sends of the producer that began this Kafka transaction, if known. */
    final KafkaTransactionSends.@Nullable Sends sends;

    @Nullable Map<TopicPartition, OffsetAndMetadata> offsetsAt;
    @Nullable ConsumerGroupMetadata group;

    Opened(
        TransactionStatus status,
        @Nullable List<ContainerTransactions.Completion> outer,
        @Nullable KafkaAware<?, ?> kafka,
        KafkaTransactionSends.@Nullable Sends sends) {
      this.status = status;
      this.outer = outer;
      this.kafka = kafka;
      this.sends = sends;
    }
  }

  private final PlatformTransactionManager delegate;

  ContainerTransactionManager(PlatformTransactionManager delegate) {
    this.delegate = delegate;
  }

  /** Wraps a container's manager, keeping it Kafka-aware if it is; one wrapped already is kept. */
  @SuppressWarnings({"unchecked", "rawtypes"})
  static PlatformTransactionManager wrap(PlatformTransactionManager manager) {
    if (manager instanceof ContainerTransactionManager) {
      return manager;
    }
    return manager instanceof KafkaAwareTransactionManager kafka
        ? new KafkaAware(kafka)
        : new ContainerTransactionManager(manager);
  }

  @Override
  public TransactionStatus getTransaction(@Nullable TransactionDefinition definition)
      throws TransactionException {
    KafkaAware<?, ?> kafka = this instanceof KafkaAware<?, ?> aware ? aware : null;
    // the producer that begins a Kafka transaction does so within getTransaction, on this thread
    KafkaTransactionSends.Capture capture = kafka != null ? KafkaTransactionSends.capture() : null;
    TransactionStatus status;
    KafkaTransactionSends.Sends sends;
    try {
      status = delegate.getTransaction(definition);
    } finally {
      sends = capture != null ? capture.end() : null;
    }
    if (status.isNewTransaction()) {
      OPENED.get().push(new Opened(status, ContainerTransactions.beginLocal(), kafka, sends));
    }
    return status;
  }

  /**
   * The sends of the producer of the innermost Kafka transaction this thread's container opened, or
   * null if there is none or its producer is not known ({@link KafkaTransactionSends}): what a
   * listener's call added to them was produced in that transaction.
   */
  static KafkaTransactionSends.@Nullable Sends kafkaTransactionSends() {
    Deque<Opened> opened = OPENED.get();
    Opened top = opened.peek();
    if (top == null) {
      OPENED.remove();
      return null;
    }
    return top.kafka != null ? top.sends : null;
  }

  /**
   * Whether the innermost transaction this thread's container opened is a Kafka one (its offsets
   * can be committed up to a batch's stop, {@link #commitOffsetsAt}).
   */
  static boolean inKafkaTransaction() {
    Deque<Opened> opened = OPENED.get();
    Opened top = opened.peek();
    if (top == null) {
      OPENED.remove();
      return false;
    }
    return top.kafka != null;
  }

  /**
   * Has the innermost Kafka transaction this thread's container opened commit the consumer offsets
   * {@code offsets} (the next record to read of each partition), whatever the container sent to it
   * before: a batch that stopped partway commits the records before the stop, not those the
   * consumer was sought back to.
   *
   * @return whether such a transaction is open (if not, nothing was done)
   */
  static boolean commitOffsetsAt(
      Map<TopicPartition, OffsetAndMetadata> offsets, ConsumerGroupMetadata group) {
    Deque<Opened> opened = OPENED.get();
    Opened top = opened.peek();
    if (top == null || top.kafka == null) {
      if (opened.isEmpty()) {
        OPENED.remove();
      }
      return false;
    }
    top.offsetsAt = Map.copyOf(offsets);
    top.group = group;
    return true;
  }

  @Override
  public void commit(TransactionStatus status) throws TransactionException {
    Opened top = OPENED.get().peek();
    boolean stopped = stopPrepared(top, status);
    List<ContainerTransactions.Completion> completions = close(status);
    if (stopped) {
      try {
        top.kafka.sendOffsetsAt(top.offsetsAt, top.group);
      } catch (RuntimeException | Error failure) {
        try {
          delegate.rollback(status);
        } finally {
          notCommitted(completions, stopped);
        }
        throw failure;
      }
    }
    try {
      delegate.commit(status);
    } catch (RuntimeException | Error failure) {
      notCommitted(completions, stopped);
      throw failure;
    }
    // a commit may roll back instead (rollback-only): only a real commit records
    if (status.isRollbackOnly()) {
      notCommitted(completions, stopped);
    } else {
      ContainerTransactions.complete(completions, true);
    }
  }

  @Override
  public void rollback(TransactionStatus status) throws TransactionException {
    boolean stopped = stopPrepared(OPENED.get().peek(), status);
    List<ContainerTransactions.Completion> completions = close(status);
    try {
      delegate.rollback(status);
    } finally {
      notCommitted(completions, stopped);
    }
  }

  /**
   * Whether {@code top}, the innermost transaction opened, is {@code status}'s and a Kafka batch
   * that stopped partway had it commit the records before its stop ({@link #commitOffsetsAt}).
   */
  private static boolean stopPrepared(@Nullable Opened top, TransactionStatus status) {
    return top != null && top.status == status && top.offsetsAt != null && top.kafka != null;
  }

  /**
   * Completes what waits on a transaction that did not commit: released, unless a Kafka batch
   * stopped partway in it ({@code stopped}, {@link KafkaTransactionBatchStops}). Then the records
   * before the stop are recorded all the same, as its commit would have recorded them, except those
   * whose records were produced in the transaction ({@link
   * ContainerTransactions.Completion#stopNotCommitted()}):
   *
   * <ul>
   *   <li>A message whose send is outside the transaction (a provider call): its send happened,
   *       Spring Kafka's error handler committed its offset through the consumer, outside the
   *       transaction, before it sought back, and only the after-rollback processor's seek brings
   *       it back, which must then be a replay, not a second send (a dead letter the producer
   *       refused leaves the transaction unable to commit at every redelivery).
   *   <li>A message whose record was produced in the transaction ({@link TransactionProduces}): the
   *       abort discarded it, its send; released, the redelivery produces it again, once, in a
   *       transaction that may commit. Where the records cannot be told apart by message, the whole
   *       batch is released.
   * </ul>
   */
  private static void notCommitted(
      List<ContainerTransactions.Completion> completions, boolean stopped) {
    if (stopped) {
      ContainerTransactions.completeStopped(completions);
    } else {
      ContainerTransactions.complete(completions, false);
    }
  }

  /** Closes the local transaction {@code status} opened, if it opened one. */
  private static List<ContainerTransactions.Completion> close(TransactionStatus status) {
    Deque<Opened> opened = OPENED.get();
    Opened top = opened.peek();
    if (top == null || top.status != status) {
      return List.of();
    }
    opened.pop();
    if (opened.isEmpty()) {
      OPENED.remove();
    }
    return ContainerTransactions.endLocal(top.outer);
  }

  /** A Kafka-aware manager, wrapped: the container finds its producers through it. */
  static final class KafkaAware<K, V> extends ContainerTransactionManager
      implements KafkaAwareTransactionManager<K, V> {

    private final KafkaAwareTransactionManager<K, V> kafka;

    KafkaAware(KafkaAwareTransactionManager<K, V> kafka) {
      super(kafka);
      this.kafka = kafka;
      ProducerFactory<K, V> producers = kafka.getProducerFactory();
      if (producers != null) {
        // so that a stop's rollback knows whether the listener produced in the transaction
        KafkaTransactionSends.observe(producers);
      }
    }

    @Override
    public ProducerFactory<K, V> getProducerFactory() {
      return kafka.getProducerFactory();
    }

    /** Sends {@code offsets} to this thread's transaction of this manager, before its commit. */
    void sendOffsetsAt(
        Map<TopicPartition, OffsetAndMetadata> offsets, @Nullable ConsumerGroupMetadata group) {
      KafkaResourceHolder<?, ?> holder =
          (KafkaResourceHolder<?, ?>)
              TransactionSynchronizationManager.getResource(kafka.getProducerFactory());
      if (holder == null || group == null) {
        throw new IllegalStateException(
            "the container's Kafka transaction has no producer bound to its thread");
      }
      holder.getProducer().sendOffsetsToTransaction(offsets, group);
    }
  }
}
