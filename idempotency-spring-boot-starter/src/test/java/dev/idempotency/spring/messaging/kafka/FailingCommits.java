package dev.idempotency.spring.messaging.kafka;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.springframework.kafka.KafkaException;
import org.springframework.kafka.core.ProducerFactory;
import org.springframework.kafka.transaction.KafkaTransactionManager;
import org.springframework.transaction.support.DefaultTransactionStatus;

/**
 * Spring Kafka's transaction manager, on the real broker, whose commit fails once for the
 * transactions of the events a test names: instead of committing, it throws as a failed {@code
 * commitTransaction()} would, and Spring then aborts the producer's transaction at the broker (the
 * records the listener produced and the consumer offsets are discarded), and the container's
 * after-rollback processor seeks back, so the broker delivers the record again.
 */
final class FailingCommits extends KafkaTransactionManager<Object, Object> {

  private static final long serialVersionUID = 1L;

  private final transient Set<String> failNext = ConcurrentHashMap.newKeySet();
  private final transient ThreadLocal<String> running = new ThreadLocal<>();

  FailingCommits(ProducerFactory<Object, Object> producers) {
    super(producers);
  }

  /** The next commit of a transaction in which {@code event} ran fails. */
  void failNextCommitOf(String event) {
    failNext.add(event);
  }

  /** Called by a listener: the transaction on this thread runs {@code event}. */
  void running(String event) {
    running.set(event);
  }

  @Override
  protected void doCommit(DefaultTransactionStatus status) {
    String event = running.get();
    running.remove();
    if (event != null && failNext.remove(event)) {
      throw new KafkaException("the commit of the transaction of " + event + " failed (test)");
    }
    super.doCommit(status);
  }

  @Override
  protected void doCleanupAfterCompletion(Object transaction) {
    running.remove();
    super.doCleanupAfterCompletion(transaction);
  }
}
