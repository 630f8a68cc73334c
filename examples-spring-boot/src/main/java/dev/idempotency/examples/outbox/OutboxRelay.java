package dev.idempotency.examples.outbox;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.examples.providers.FakeSmsProvider;
import java.time.Duration;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.scheduling.annotation.Scheduled;
import org.springframework.stereotype.Component;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * Sends what the outbox holds. Each pass locks a batch of unsent rows in a transaction of its own,
 * sends each row through the guard in the usual mode (never joined: the provider call is outside
 * any transaction the guard records in), keyed by the row's id and passing the provider key, and
 * marks it sent. A relay that dies after a send and before its commit leaves the row unsent; the
 * next pass's guard replays the recorded send instead of sending again.
 */
@Component
public class OutboxRelay {

  private static final Logger log = LoggerFactory.getLogger(OutboxRelay.class);
  private static final int BATCH = 50;
  private static final Duration WINDOW = Duration.ofHours(24);

  private final Outbox outbox;
  private final IdempotencyGuard guard;
  private final FakeSmsProvider sms;
  private final TransactionTemplate transactions;

  OutboxRelay(
      Outbox outbox,
      IdempotencyGuard guard,
      FakeSmsProvider sms,
      TransactionTemplate transactions) {
    this.outbox = outbox;
    this.guard = guard;
    this.sms = sms;
    this.transactions = transactions;
  }

  /**
   * Polls the outbox, every {@code outbox.relay.interval} unless {@code
   * outbox.relay.enabled=false}.
   */
  @Scheduled(fixedDelayString = "${outbox.relay.interval:1s}")
  void poll() {
    relayOnce();
  }

  /**
   * One pass over the outbox.
   *
   * @return how many rows were marked sent
   */
  public int relayOnce() {
    Integer sent = transactions.execute(status -> sendBatch(outbox.lockUnsent(BATCH)));
    if (sent != null && sent > 0) {
      log.info("the relay sent {} outbox rows", sent); // a count: no key, no result
    }
    return sent == null ? 0 : sent;
  }

  private int sendBatch(List<Outbox.Row> rows) {
    int sent = 0;
    for (Outbox.Row row : rows) {
      String messageId;
      try {
        messageId =
            guard.execute(
                IdempotencyKey.of("outbox-sms", row.id()),
                WINDOW,
                ctx -> sms.send(row.phone(), row.text(), ctx.providerKey()));
      } catch (RuntimeException e) {
        // the provider failed: the guard released the key, the row stays unsent for the next pass
        // neither the row's id (it is the key) nor the message is logged
        log.warn(
            "an outbox send failed and is retried on the next pass: {} (cause: {})",
            e.getClass().getName(),
            e.getCause() == null ? "none" : e.getCause().getClass().getName());
        continue;
      }
      outbox.markSent(row.id(), messageId);
      sent++;
    }
    return sent;
  }
}
