package dev.idempotency.spring.messaging.kafka;

import dev.idempotency.spring.messaging.BatchDeliveryFailedException;
import dev.idempotency.spring.messaging.IdempotentDelivery;
import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.Sends;
import java.util.List;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.core.KafkaTemplate;

/**
 * Listeners in containers with a Kafka transaction: each sends through {@link Sends}, then produces
 * the event to {@value #OUTPUT} in the container's transaction (its transactional work).
 */
public class KafkaTransactionListeners {

  static final String RECORD = "kafka-tx-record";
  static final String BATCH = "kafka-tx-batch";
  static final String OUTPUT = "idem.tx.out";

  private final Sends sends;
  private final KafkaTemplate<Object, Object> template;
  private final FailingCommits commits;

  KafkaTransactionListeners(
      Sends sends, KafkaTemplate<Object, Object> template, FailingCommits commits) {
    this.sends = sends;
    this.template = template;
    this.commits = commits;
  }

  @KafkaListener(id = RECORD, topics = "idem.tx")
  @IdempotentListener(name = RECORD, key = "#event")
  public void record(String event) {
    sends.send(RECORD, event, IdempotentDelivery.context());
    template.send(OUTPUT, event);
    commits.running(event);
  }

  @KafkaListener(id = BATCH, topics = "idem.tx-batch", batch = "true", autoStartup = "false")
  @IdempotentListener(name = BATCH, key = "#payload")
  public void batch(List<String> events) {
    for (int i = 0; i < events.size(); i++) {
      String event = events.get(i);
      try {
        sends.send(BATCH, event, IdempotentDelivery.context(event));
      } catch (RuntimeException failure) {
        throw new BatchDeliveryFailedException(i, failure);
      }
      template.send(OUTPUT, event);
      commits.running(event);
    }
  }
}
