package dev.idempotency.spring.messaging.jms;

import dev.idempotency.spring.messaging.IdempotentDelivery;
import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.IdempotentListener.StoredFailure;
import dev.idempotency.spring.messaging.Sends;
import org.springframework.jms.annotation.JmsListener;

/** The JMS test application's listeners: each sends through {@link Sends}. */
public class JmsListeners {

  static final String RECORD = "jms-record";
  static final String DEAD_LETTER = "jms-dead-letter";
  static final String HEADER = "JmsListeners.fromHeader";
  static final String KEYED = "jms-keyed";

  private final Sends sends;

  JmsListeners(Sends sends) {
    this.sends = sends;
  }

  @JmsListener(id = RECORD, destination = "idem.record")
  @IdempotentListener(name = RECORD, key = "#event")
  public void record(String event) {
    sends.send(RECORD, event, IdempotentDelivery.context());
  }

  @JmsListener(id = DEAD_LETTER, destination = "idem.dead-letter")
  @IdempotentListener(name = DEAD_LETTER, key = "#event", storedFailure = StoredFailure.DEAD_LETTER)
  public void deadLetter(String event) {
    sends.send(DEAD_LETTER, event, IdempotentDelivery.context());
  }

  @JmsListener(id = KEYED, destination = "idem.keyed")
  @IdempotentListener(
      name = KEYED,
      key = "T(dev.idempotency.spring.messaging.KeyEvaluations).keyOf(#event)")
  public void keyed(String event) {
    sends.send(KEYED, event, IdempotentDelivery.context());
  }

  @JmsListener(id = "jms-header", destination = "idem.header")
  @IdempotentListener
  public void fromHeader(String event) {
    sends.send(HEADER, event, IdempotentDelivery.context());
  }
}
