package dev.idempotency.spring.messaging;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.IdempotencyKey;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * {@link ListenerContract} plus batch listeners, for the brokers whose Spring support has them
 * (Kafka, RabbitMQ): the batch's keys claimed together, a duplicate inside a batch sent once, a key
 * in flight stopping the batch there, and a failure that names its message.
 */
public abstract class BatchListenerContract extends ListenerContract {

  /** The batch listener's operation name. */
  protected abstract String batchListener();

  /** Publishes messages that the batch listener receives as one batch, and lets it run. */
  protected abstract void publishBatch(List<String> payloads) throws Exception;

  /** Stops the batch listener after a batch test. */
  protected abstract void afterBatch() throws Exception;

  @Test
  void aBatchRunsOnlyWhatWasNotSentAndSendsADuplicateInTheBatchOnce() throws Exception {
    String sent = unique("b-sent");
    String fresh = unique("b-new");
    String twice = unique("b-twice");
    try {
      publishBatch(List.of(sent));
      await("the first batch", () -> sends.of(sent).size() == 1);
      afterBatch();
      publishBatch(List.of(sent, fresh, twice, twice));

      await("the second batch", () -> sends.of(fresh).size() == 1 && sends.of(twice).size() == 1);
      assertRecorded(batchListener(), fresh);
      assertRecorded(batchListener(), twice);
      assertThat(sends.runs(sent)).isEqualTo(1);
      assertThat(sends.runs(twice)).as("a duplicate inside one batch runs once").isEqualTo(1);
      assertThat(events.count(Type.REPLAYED, batchListener(), sent)).isEqualTo(1);
      assertThat(sends.of(fresh).get(0).providerKey())
          .isEqualTo(IdempotencyKey.providerKey(IdempotencyKey.of(batchListener(), fresh)));
      assertAcknowledged(batchListener());
    } finally {
      afterBatch();
    }
  }

  @Test
  void aBatchStopsAtAKeyInFlightAndEveryMessageIsSentOnce() throws Exception {
    String before = unique("b-before");
    String busy = unique("b-busy");
    String after = unique("b-after");
    CompletableFuture<String> elsewhere = new CompletableFuture<>();
    CountDownLatch release = holdInFlight(batchListener(), busy, elsewhere);
    try {
      publishBatch(List.of(before, busy, after));
      await("the message before the busy one", () -> sends.of(before).size() == 1);
      // the batch keeps coming back meanwhile: each delivery claims the message after the busy one
      // and releases it when the batch stops at the busy one (Kafka and RabbitMQ alike)
      await(
          "the batch delivered again",
          () -> events.count(Type.RELEASED, batchListener(), after) >= 2);
      assertThat(sends.runs(busy)).isZero();
      assertThat(deadLettered(batchListener())).doesNotContain(busy);

      release.countDown();
      assertThat(elsewhere.get(30, TimeUnit.SECONDS)).isEqualTo("sent-elsewhere");
      await("the message after it", () -> sends.of(after).size() == 1);
      assertThat(sends.runs(before)).isEqualTo(1);
      assertThat(sends.runs(busy)).isZero();
      assertThat(sends.runs(after)).isEqualTo(1);
      assertAcknowledged(batchListener());
      assertThat(deadLettered(batchListener())).doesNotContain(busy);
    } finally {
      release.countDown();
      afterBatch();
    }
  }

  @Test
  void aBatchListenerThatNamesItsFailedMessageKeepsWhatItSent() throws Exception {
    String ok = unique("b-ok");
    String failing = unique("b-failing");
    String rest = unique("b-rest");
    sends.failNext(failing, 1);
    try {
      publishBatch(List.of(ok, failing, rest));
      await(
          "every message sent",
          () ->
              sends.of(ok).size() == 1
                  && sends.of(failing).size() == 1
                  && sends.of(rest).size() == 1);
      assertThat(sends.runs(ok)).as("sent before the failure: not sent again").isEqualTo(1);
      assertThat(sends.runs(failing)).isEqualTo(2);
      assertThat(sends.runs(rest)).isEqualTo(1);
      assertAcknowledged(batchListener());
    } finally {
      afterBatch();
    }
  }
}
