package dev.idempotency.spring.messaging;

import java.util.ArrayList;
import java.util.List;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.transaction.support.TransactionSynchronization;
import org.springframework.transaction.support.TransactionSynchronizationManager;
import org.springframework.util.ClassUtils;

/**
 * The transaction a listener container runs a delivery in, which commits after the listener
 * returned: a delivery's outcome waits for it, so that it is recorded only once that transaction
 * committed, and the key is released if it did not.
 *
 * <ul>
 *   <li>A local transaction, opened on the thread by the starter's hook of the container, which
 *       tells how it ended: Spring Kafka's container transaction ({@link
 *       ContainerTransactionManager} wraps its transaction manager: the consumer offsets and the
 *       records the listener produced), and a JMS session that the container transacts ({@link
 *       JmsDeliveryListener} commits it once the listener returned, then records). Spring's own
 *       Kafka, JMS and RabbitMQ transaction managers never activate synchronization, hence these.
 *   <li>Else a Spring-managed transaction with synchronization active around the listener (JTA, a
 *       JDBC or JPA transaction manager on the container, a transaction the caller opened): the
 *       outcome waits in a {@link TransactionSynchronization}.
 * </ul>
 *
 * Recorded after the commit; released after a rollback or a commit that failed (as a failed commit
 * of the listener's own {@code @Transactional} releases, the guard running outside it), except the
 * messages before the stop of a Kafka batch that stopped partway, recorded even then unless their
 * records were produced in the transaction ({@link ContainerTransactionManager}: their offsets were
 * committed outside the transaction); left claimed until its lease runs out when the transaction
 * can no longer commit and the broker gave no verdict (a JMS session closed before its commit,
 * {@link JmsSessionCommit}). Thread-bound, as the containers' own transactions are.
 */
final class ContainerTransactions {

  private static final Logger log = LoggerFactory.getLogger(IdempotentListener.class);

  /** spring-tx is the application's (Spring Kafka, JMS and AMQP bring it). */
  private static final boolean SPRING_TX =
      ClassUtils.isPresent(
          "org.springframework.transaction.support.TransactionSynchronizationManager",
          ContainerTransactions.class.getClassLoader());

  private static final ThreadLocal<List<Completion>> LOCAL = new ThreadLocal<>();

  private ContainerTransactions() {}

  /** What waits for the end of a delivery's transaction. */
  interface Completion {

    /** The transaction committed: record the outcome. */
    void committed();

    /** The transaction rolled back, or its commit failed: release. */
    void rolledBack();

    /**
     * The transaction cannot commit any more, and did not roll back on the broker's word (a JMS
     * session closed under the delivery before its commit): neither record nor release, and leave
     * the key claimed, as a crash leaves it, until its lease runs out.
     */
    void abandoned();

    /**
     * The container's Kafka transaction of a batch that stopped partway did not commit after all
     * ({@link ContainerTransactionManager}): the messages before the stop were sent, and their
     * offsets committed outside the transaction, so they are recorded, as {@link #committed()} does
     * (the default); except those whose records, produced in that transaction ({@link
     * KafkaTransactionSends}), its abort discarded: released, to be produced again.
     */
    default void stopNotCommitted() {
      committed();
    }
  }

  /** Whether the delivery on this thread runs in a transaction that commits after the listener. */
  static boolean active() {
    return LOCAL.get() != null || springSynchronized();
  }

  /**
   * Whether the delivery on this thread runs in a local transaction of its listener container
   * (Spring Kafka's container transaction, a transacted JMS session), not only in a Spring-managed
   * one around the listener.
   */
  static boolean containerLocal() {
    return LOCAL.get() != null;
  }

  /** Whether a Spring-managed transaction, with synchronization, is active on this thread. */
  static boolean springSynchronized() {
    return SPRING_TX && Synchronizations.active();
  }

  /**
   * Has {@code completion} run when the transaction of {@link #active()} ends.
   *
   * @throws IllegalStateException if none is active
   */
  static void onCompletion(Completion completion) {
    List<Completion> local = LOCAL.get();
    if (local != null) {
      local.add(completion);
    } else if (springSynchronized()) {
      Synchronizations.register(completion);
    } else {
      throw new IllegalStateException("no container transaction is active on this thread");
    }
  }

  /**
   * Opens a local transaction on this thread (a Kafka container's transaction, a transacted JMS
   * session).
   *
   * @return what to hand to {@link #endLocal}
   */
  static @Nullable List<Completion> beginLocal() {
    List<Completion> previous = LOCAL.get();
    LOCAL.set(new ArrayList<>());
    return previous;
  }

  /**
   * Closes the local transaction of {@link #beginLocal}.
   *
   * @return what waits for its end, in order
   */
  static List<Completion> endLocal(@Nullable List<Completion> previous) {
    List<Completion> completions = LOCAL.get();
    if (previous == null) {
      LOCAL.remove();
    } else {
      LOCAL.set(previous);
    }
    return completions == null ? List.of() : completions;
  }

  /** Runs each completion; one that fails does not keep the others from running. */
  static void complete(List<Completion> completions, boolean committed) {
    for (Completion completion : completions) {
      run(completion, committed);
    }
  }

  /** Runs each completion's {@link Completion#stopNotCommitted()}, as {@link #complete} does. */
  static void completeStopped(List<Completion> completions) {
    for (Completion completion : completions) {
      try {
        completion.stopNotCommitted();
      } catch (RuntimeException e) {
        log.warn("Recording the outcome of a listener's transaction failed", e);
      }
    }
  }

  /** Runs each completion's {@link Completion#abandoned()}, as {@link #complete} does. */
  static void abandon(List<Completion> completions) {
    for (Completion completion : completions) {
      try {
        completion.abandoned();
      } catch (RuntimeException e) {
        log.warn("Abandoning the outcome of a listener's transaction failed", e);
      }
    }
  }

  private static void run(Completion completion, boolean committed) {
    try {
      if (committed) {
        completion.committed();
      } else {
        completion.rolledBack();
      }
    } catch (RuntimeException e) {
      log.warn("Recording the outcome of a listener's transaction failed", e);
    }
  }

  /** Spring's synchronizations: loaded only where spring-tx is present. */
  private static final class Synchronizations {

    static boolean active() {
      return TransactionSynchronizationManager.isSynchronizationActive();
    }

    static void register(Completion completion) {
      TransactionSynchronizationManager.registerSynchronization(
          new TransactionSynchronization() {
            @Override
            public void afterCompletion(int status) {
              // STATUS_UNKNOWN (a heuristic outcome) is not known to have committed: released
              run(completion, status == STATUS_COMMITTED);
            }
          });
    }
  }
}
