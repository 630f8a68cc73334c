package dev.idempotency.spring.messaging.rabbit;

import dev.idempotency.spring.messaging.IdempotentDelivery;
import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.IdempotentListener.StoredFailure;
import dev.idempotency.spring.messaging.Sends;
import java.util.List;
import org.springframework.amqp.rabbit.annotation.RabbitListener;

/** The RabbitMQ test application's listeners: each sends through {@link Sends}. */
public class RabbitListeners {

  static final String RECORD = "rabbit-record";
  static final String DEAD_LETTER = "rabbit-dead-letter";
  static final String HEADER = "RabbitListeners.fromHeader";
  static final String KEYED = "rabbit-keyed";
  static final String BATCH = "rabbit-batch";

  private final Sends sends;

  RabbitListeners(Sends sends) {
    this.sends = sends;
  }

  @RabbitListener(id = RECORD, queues = "idem.record")
  @IdempotentListener(name = RECORD, key = "#event")
  public void record(String event) {
    sends.send(RECORD, event, IdempotentDelivery.context());
  }

  @RabbitListener(id = DEAD_LETTER, queues = "idem.dead-letter")
  @IdempotentListener(name = DEAD_LETTER, key = "#event", storedFailure = StoredFailure.DEAD_LETTER)
  public void deadLetter(String event) {
    sends.send(DEAD_LETTER, event, IdempotentDelivery.context());
  }

  @RabbitListener(id = KEYED, queues = "idem.keyed")
  @IdempotentListener(
      name = KEYED,
      key = "T(dev.idempotency.spring.messaging.KeyEvaluations).keyOf(#event)")
  public void keyed(String event) {
    sends.send(KEYED, event, IdempotentDelivery.context());
  }

  @RabbitListener(id = "rabbit-header", queues = "idem.header")
  @IdempotentListener
  public void fromHeader(String event) {
    sends.send(HEADER, event, IdempotentDelivery.context());
  }

  @RabbitListener(
      id = BATCH,
      queues = "idem.batch",
      containerFactory = "batchFactory",
      autoStartup = "false")
  @IdempotentListener(name = BATCH, key = "#payload")
  public void batch(List<String> events) {
    sends.sendBatch(BATCH, events);
  }
}
