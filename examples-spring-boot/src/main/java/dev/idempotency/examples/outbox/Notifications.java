package dev.idempotency.examples.outbox;

import org.springframework.stereotype.Service;
import org.springframework.transaction.annotation.Transactional;

/** The service {@code POST /notify} calls: the transaction the enqueue joins. */
@Service
public class Notifications {

  private final Outbox outbox;

  Notifications(Outbox outbox) {
    this.outbox = outbox;
  }

  /**
   * Enqueues an SMS once per request key. No provider is called here: a rollback could not take
   * back a message a provider accepted, and its latency would hold this transaction and the key's
   * lock open.
   *
   * @param requestKey the client's idempotency key
   * @param phone the recipient
   * @param text the message
   * @return the outbox row's id, the committed one on a repeat
   */
  @Transactional
  public String notify(String requestKey, String phone, String text) {
    return outbox.enqueue(requestKey, phone, text);
  }
}
