package dev.idempotency.spring.messaging;

import java.util.ArrayDeque;
import java.util.Deque;
import java.util.List;
import org.jspecify.annotations.Nullable;
import org.springframework.kafka.core.ProducerFactory;
import org.springframework.kafka.transaction.KafkaAwareTransactionManager;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.TransactionDefinition;
import org.springframework.transaction.TransactionException;
import org.springframework.transaction.TransactionStatus;

/**
 * A listener container's transaction manager, wrapped so that {@link ContainerTransactions} learns
 * when the container's transaction ended and how: Spring Kafka's {@code KafkaTransactionManager}
 * (like Spring's JMS and RabbitMQ ones) never activates transaction synchronization, so nothing
 * else tells a listener's advice that the container's commit succeeded. Each new transaction it
 * begins opens a local transaction on the thread; its commit then completes what waits on it
 * (recorded), and a rollback or a commit that fails completes it as rolled back (released).
 * Everything else is the wrapped manager's. Installed by {@link ListenerContainerHooks} on each
 * Spring Kafka listener container before it starts.
 */
class ContainerTransactionManager implements PlatformTransactionManager {

  /** The local transactions this thread's managers opened, innermost first. */
  private static final ThreadLocal<Deque<Opened>> OPENED = ThreadLocal.withInitial(ArrayDeque::new);

  private record Opened(
      TransactionStatus status, @Nullable List<ContainerTransactions.Completion> outer) {}

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
    TransactionStatus status = delegate.getTransaction(definition);
    if (status.isNewTransaction()) {
      OPENED.get().push(new Opened(status, ContainerTransactions.beginLocal()));
    }
    return status;
  }

  @Override
  public void commit(TransactionStatus status) throws TransactionException {
    List<ContainerTransactions.Completion> completions = close(status);
    try {
      delegate.commit(status);
    } catch (RuntimeException | Error failure) {
      ContainerTransactions.complete(completions, false);
      throw failure;
    }
    // a commit may roll back instead (rollback-only): only a real commit records
    ContainerTransactions.complete(completions, !status.isRollbackOnly());
  }

  @Override
  public void rollback(TransactionStatus status) throws TransactionException {
    List<ContainerTransactions.Completion> completions = close(status);
    try {
      delegate.rollback(status);
    } finally {
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
    }

    @Override
    public ProducerFactory<K, V> getProducerFactory() {
      return kafka.getProducerFactory();
    }
  }
}
