package dev.idempotency.tck;

import static java.time.Duration.ZERO;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.Batch;
import dev.idempotency.IdempotencyEvent;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.KeyStoreException;
import dev.idempotency.Outcome;
import dev.idempotency.ResultCodec;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.KeyStore;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * The guard's promises on a store when the application interrupts a sender, or a reply is lost: the
 * outcome of a send that happened is recorded (or a failed one released), and a completion the
 * store applied but whose reply was lost counts as written. Part of {@link GuardOnStoreContract};
 * extend that one.
 */
public abstract class GuardInterruptContract extends GuardBatchContract {

  /**
   * A sender that returns normally on a thread whose interrupt flag is set (a {@code
   * Future.cancel(true)}, a {@code shutdownNow()} or a time limiter, while the provider call was
   * finishing) has its outcome recorded all the same, and the flag is still set afterwards.
   */
  @Test
  public void senderThatReturnsOnAnInterruptedThreadHasItsOutcomeRecorded() {
    IdempotencyGuard guard = IdempotencyGuard.builder().store(store()).build();
    String key = "interrupted:" + newKeyId();
    AtomicInteger sends = new AtomicInteger();

    Outcome<String> first;
    boolean interruptedAfterwards;
    try {
      first =
          guard.executeForOutcome(
              IdempotencyRequest.of(key, LONG_RETENTION),
              ResultCodec.string(),
              ctx -> {
                sends.incrementAndGet();
                beforeAnInterruptedOutcomeIsWritten();
                Thread.currentThread().interrupt();
                return "sent";
              });
    } finally {
      interruptedAfterwards = Thread.interrupted();
    }
    String again = guard.execute(key, LONG_RETENTION, ctx -> "again-" + sends.incrementAndGet());

    assertThat(interruptedAfterwards).as("the interrupt is kept for the caller").isTrue();
    assertThat(first.recorded()).as("the outcome was written").isTrue();
    assertThat(again).isEqualTo("sent");
    assertThat(sends).hasValue(1);
  }

  /** A failed send on an interrupted thread is released all the same: a retry sends at once. */
  @Test
  public void failedSendOnAnInterruptedThreadIsReleased() {
    IdempotencyGuard guard = IdempotencyGuard.builder().store(store()).build();
    String key = "interrupted-failure:" + newKeyId();

    boolean interruptedAfterwards;
    try {
      assertThatThrownBy(
              () ->
                  guard.execute(
                      key,
                      LONG_RETENTION,
                      ctx -> {
                        beforeAnInterruptedOutcomeIsWritten();
                        Thread.currentThread().interrupt();
                        throw new IllegalStateException("provider refused");
                      }))
          .hasMessage("provider refused");
    } finally {
      interruptedAfterwards = Thread.interrupted();
    }
    Outcome<String> retry =
        IdempotencyGuard.builder()
            .store(store())
            .inFlightWait(ZERO)
            .build()
            .executeForOutcome(
                IdempotencyRequest.of(key, LONG_RETENTION), ResultCodec.string(), ctx -> "retry");

    assertThat(interruptedAfterwards).isTrue();
    assertThat(retry.value()).isEqualTo("retry");
    assertThat(retry.attempt()).as("released, not taken over").isEqualTo(1);
  }

  /** A batch recorded on an interrupted thread writes every outcome, and keeps the interrupt. */
  @Test
  public void batchRecordedOnAnInterruptedThreadWritesEveryOutcome() {
    IdempotencyGuard guard = IdempotencyGuard.builder().store(store()).build();
    String run = newKeyId();
    List<IdempotencyRequest> requests = new ArrayList<>();
    for (int i = 0; i < 5; i++) {
      requests.add(IdempotencyRequest.of("interrupted-batch:" + run + ":" + i, LONG_RETENTION));
    }
    Batch<String> batch = guard.claimBatch(requests, ResultCodec.string());
    for (Batch.Item item : batch.toSend()) {
      batch.succeeded(item, "n:" + item.key());
    }

    Batch.Recorded recorded;
    boolean interruptedAfterwards;
    try {
      beforeAnInterruptedOutcomeIsWritten();
      Thread.currentThread().interrupt();
      recorded = batch.record();
    } finally {
      interruptedAfterwards = Thread.interrupted();
    }

    assertThat(interruptedAfterwards).isTrue();
    assertThat(recorded.completed()).isEqualTo(5);
    assertThat(recorded.notRecorded()).isEmpty();
    assertThat(guard.claimBatch(requests, ResultCodec.string()).replayed()).hasSize(5);
  }

  /**
   * Called by the interrupt tests inside the sender, just before it sets its thread's interrupt
   * flag: a store's test makes the write that follows harder here (Redis: flush the scripts, so
   * that the completion has to load its script again).
   */
  protected void beforeAnInterruptedOutcomeIsWritten() {}

  /**
   * A completion the store applied but whose reply was lost (a timeout, a cut connection) is sent
   * again by its owner, and that repeat counts as written: the call reports its outcome recorded,
   * with no {@code OUTCOME_NOT_RECORDED} event and no warning that a repeat may send again.
   */
  @Test
  public void completionAppliedBeforeItsReplyWasLostIsRecorded() {
    AtomicInteger lostReplies = new AtomicInteger();
    KeyStore lossy =
        new ForwardingKeyStore(store()) {
          @Override
          public boolean complete(CompleteRequest request) {
            boolean written = delegate.complete(request);
            if (lostReplies.getAndIncrement() == 0) {
              throw new KeyStoreException("the reply was lost", null);
            }
            return written;
          }

          @Override
          public List<Boolean> completeAll(List<CompleteRequest> requests) {
            List<Boolean> written = delegate.completeAll(requests);
            if (lostReplies.getAndIncrement() == 0) {
              throw new KeyStoreException("the reply was lost", null);
            }
            return written;
          }
        };
    List<IdempotencyEvent.Type> events = new CopyOnWriteArrayList<>();
    IdempotencyGuard guard =
        IdempotencyGuard.builder().store(lossy).listener(event -> events.add(event.type())).build();

    Outcome<String> single =
        guard.executeForOutcome(
            IdempotencyRequest.of("lost-reply:" + newKeyId(), LONG_RETENTION),
            ResultCodec.string(),
            ctx -> "sent");
    lostReplies.set(0);
    String run = newKeyId();
    List<IdempotencyRequest> requests = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      requests.add(IdempotencyRequest.of("lost-reply-batch:" + run + ":" + i, LONG_RETENTION));
    }
    Batch<String> batch = guard.claimBatch(requests, ResultCodec.string());
    for (Batch.Item item : batch.toSend()) {
      batch.succeeded(item, "n:" + item.key());
    }
    Batch.Recorded recorded = batch.record();

    assertThat(single.recorded()).isTrue();
    assertThat(recorded.completed()).isEqualTo(3);
    assertThat(recorded.notRecorded()).isEmpty();
    assertThat(events).doesNotContain(IdempotencyEvent.Type.OUTCOME_NOT_RECORDED);
  }
}
