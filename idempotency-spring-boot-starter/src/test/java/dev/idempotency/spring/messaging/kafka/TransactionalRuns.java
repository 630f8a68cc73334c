package dev.idempotency.spring.messaging.kafka;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.springframework.kafka.core.KafkaTemplate;

/**
 * A test listener's work in its container's Kafka transaction: counts its runs per event, and
 * produces the event to {@value KafkaTransactionListeners#OUTPUT} in that transaction.
 */
abstract class TransactionalRuns {
  final Map<String, AtomicInteger> runs = new ConcurrentHashMap<>();
  private final KafkaTemplate<Object, Object> template;
  private final FailingCommits commits;

  TransactionalRuns(KafkaTemplate<Object, Object> template, FailingCommits commits) {
    this.template = template;
    this.commits = commits;
  }

  /** Counts a run of {@code event} and produces it. */
  void run(String event) {
    count(event);
    produce(event);
  }

  void count(String event) {
    runs.computeIfAbsent(event, e -> new AtomicInteger()).incrementAndGet();
  }

  /** Produces {@code event} in the container's transaction. */
  void produce(String event) {
    template.send(KafkaTransactionListeners.OUTPUT, event);
    commits.running(event);
  }

  int runs(String event) {
    AtomicInteger count = runs.get(event);
    return count == null ? 0 : count.get();
  }
}
