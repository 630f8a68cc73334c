package dev.idempotency.spring.messaging;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.spring.messaging.Sends.PermanentFailure;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;

/**
 * The table of issue 27, row by row, on a real broker: what the store holds decides whether an
 * {@link IdempotentListener} runs and what becomes of the delivery. Each broker's test starts its
 * application once (with {@link ListenerTestConfiguration}) and says how to publish, how to see
 * that a message was acknowledged and what its dead-letter destination holds.
 */
public abstract class ListenerContract {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration TIMEOUT = Duration.ofSeconds(90);

  /** More than Spring Kafka's default ten tries and Artemis's ten delivery attempts. */
  static final int DEFERRALS_PAST_THE_BROKERS_LIMITS = 12;

  @Autowired Sends sends;
  @Autowired Events events;
  @Autowired SwitchableKeyStore store;
  @Autowired IdempotencyGuard guard;

  /** The record listener's destination, operation name: {@code <broker>-record}. */
  protected abstract String recordListener();

  /** The record listener that dead-letters stored failures. */
  protected abstract String deadLetterListener();

  /** The operation of the listener that takes its key from the Idempotency-Key header. */
  protected abstract String headerListener();

  /** The batch listener, or {@code null} where the broker's Spring support has none (JMS). */
  protected abstract String batchListener();

  /** Publishes a text message for a listener, with an Idempotency-Key header if not null. */
  protected abstract void publish(String listener, String payload, String idempotencyKey)
      throws Exception;

  /** Publishes messages that the batch listener receives as one batch, and lets it run. */
  protected abstract void publishBatch(List<String> payloads) throws Exception;

  /** Stops the batch listener after a batch test, where it needs to be stopped. */
  protected void afterBatch() throws Exception {}

  /** The payloads of a listener's dead-letter destination. */
  protected abstract List<String> deadLettered(String listener);

  /** Asserts (waiting, bounded) that nothing of the listener's destination is unacknowledged. */
  protected abstract void assertAcknowledged(String listener) throws Exception;

  @AfterEach
  void storeUp() {
    store.down.set(false);
  }

  protected static String unique(String what) {
    return what + "-" + UUID.randomUUID().toString().substring(0, 8);
  }

  protected static void await(String what, BooleanSupplier condition) throws InterruptedException {
    long deadline = System.nanoTime() + TIMEOUT.toNanos();
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError(
            "timed out after " + TIMEOUT.toSeconds() + " s waiting for " + what);
      }
      Thread.sleep(20);
    }
  }

  /** Waits for a send's outcome to be recorded, then proves it by a replay through the store. */
  void assertRecorded(String listener, String value) throws Exception {
    await("the outcome recorded", () -> events.count(Type.COMPLETED, listener, value) == 1);
    AtomicBoolean ranAgain = new AtomicBoolean();
    guard.execute(
        IdempotencyKey.of(listener, value),
        TTL,
        context -> {
          ranAgain.set(true);
          return "again";
        });
    assertThat(ranAgain).as("a repeat of the key through the store is a replay").isFalse();
  }

  /**
   * Holds a key in flight, as another consumer sending it would, until the returned latch opens.
   */
  CountDownLatch holdInFlight(String listener, String value, CompletableFuture<String> done)
      throws InterruptedException {
    CountDownLatch started = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    CompletableFuture.runAsync(
        () -> {
          try {
            done.complete(
                guard.execute(
                    IdempotencyKey.of(listener, value),
                    TTL,
                    context -> {
                      started.countDown();
                      release.await();
                      return "sent-elsewhere";
                    }));
          } catch (RuntimeException e) {
            done.completeExceptionally(e);
          }
        });
    assertThat(started.await(30, TimeUnit.SECONDS)).isTrue();
    return release;
  }

  @Test
  void aFirstDeliveryRunsIsRecordedAndAcknowledged() throws Exception {
    String event = unique("first");
    publish(recordListener(), event, null);

    await("the send", () -> sends.of(event).size() == 1);
    Sends.Send send = sends.of(event).get(0);
    assertThat(send.attempt()).isEqualTo(1);
    assertThat(send.providerKey())
        .as("the listener got the provider key of its key")
        .isEqualTo(IdempotencyKey.providerKey(IdempotencyKey.of(recordListener(), event)));
    assertRecorded(recordListener(), event);
    assertThat(events.operations(recordListener(), event))
        .as("events name the listener as the operation")
        .containsOnly(recordListener());
    assertAcknowledged(recordListener());
  }

  @Test
  void aRepublishedEventIsAcknowledgedWithoutRunningAndCountedAsAReplay() throws Exception {
    String event = unique("again");
    publish(recordListener(), event, null);
    await("the first send", () -> sends.of(event).size() == 1);
    publish(recordListener(), event, null);

    await("the replay", () -> events.count(Type.REPLAYED, recordListener(), event) == 1);
    assertThat(sends.runs(event)).as("the listener ran for the first delivery only").isEqualTo(1);
    assertAcknowledged(recordListener());
  }

  @Test
  void aDeliveryInFlightElsewhereComesBackWithBackoffAndIsNeverDeadLettered() throws Exception {
    String event = unique("in-flight");
    CompletableFuture<String> elsewhere = new CompletableFuture<>();
    CountDownLatch release = holdInFlight(recordListener(), event, elsewhere);
    long start = System.nanoTime();
    publish(recordListener(), event, null);

    await(
        DEFERRALS_PAST_THE_BROKERS_LIMITS + " deferrals",
        () ->
            events.count(Type.IN_PROGRESS_CONFLICT, recordListener(), event)
                >= DEFERRALS_PAST_THE_BROKERS_LIMITS);
    long elapsedMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
    assertThat(sends.runs(event)).isZero();
    assertThat(deadLettered(recordListener())).doesNotContain(event);
    // 12 deferrals at 50, 100, 200 ms, then 300 ms each, plus a 50 ms wait each: a hot loop
    // would take a fraction of that
    assertThat(elapsedMillis).as("the deliveries came back with backoff").isGreaterThan(2_500);

    release.countDown();
    assertThat(elsewhere.get(30, TimeUnit.SECONDS)).isEqualTo("sent-elsewhere");
    await("the replay", () -> events.count(Type.REPLAYED, recordListener(), event) >= 1);
    assertThat(sends.runs(event)).as("the listener never ran for the key").isZero();
    assertAcknowledged(recordListener());
    assertThat(deadLettered(recordListener())).doesNotContain(event);
  }

  @Test
  void aStoredPermanentFailureIsAcknowledgedWithoutRunning() throws Exception {
    String event = unique("failed");
    assertThatThrownBy(
            () ->
                guard.execute(
                    IdempotencyKey.of(recordListener(), event),
                    TTL,
                    context -> {
                      throw new PermanentFailure(event);
                    }))
        .isInstanceOf(PermanentFailure.class);
    publish(recordListener(), event, null);

    await(
        "the stored failure replayed",
        () -> events.count(Type.FAILURE_REPLAYED, recordListener(), event) >= 1);
    assertThat(sends.runs(event)).isZero();
    assertAcknowledged(recordListener());
    assertThat(deadLettered(recordListener())).doesNotContain(event);
  }

  @Test
  void aStoredPermanentFailureIsDeadLetteredWhenTheListenerChoseSo() throws Exception {
    String event = unique("failed-dlq");
    assertThatThrownBy(
            () ->
                guard.execute(
                    IdempotencyKey.of(deadLetterListener(), event),
                    TTL,
                    context -> {
                      throw new PermanentFailure(event);
                    }))
        .isInstanceOf(PermanentFailure.class);
    publish(deadLetterListener(), event, null);

    await("the dead letter", () -> deadLettered(deadLetterListener()).contains(event));
    assertThat(sends.runs(event)).isZero();
  }

  @Test
  void aFailedSendIsReleasedAndTheBrokersRedeliverySendsIt() throws Exception {
    String event = unique("retry");
    sends.failNext(event, 1);
    publish(recordListener(), event, null);

    await("the send after the broker's redelivery", () -> sends.of(event).size() == 1);
    assertThat(sends.runs(event)).isEqualTo(2);
    assertThat(events.count(Type.RELEASED, recordListener(), event)).isEqualTo(1);
    assertThat(sends.of(event).get(0).attempt())
        .as("the failed send released its key: the redelivery claimed it afresh")
        .isEqualTo(1);
    assertRecorded(recordListener(), event);
    assertAcknowledged(recordListener());
  }

  @Test
  void whileTheStoreIsDownNothingRunsAndTheDeliveryComesBackUnacknowledged() throws Exception {
    String event = unique("store-down");
    store.down.set(true);
    publish(recordListener(), event, null);

    await(
        "deliveries refused by the store",
        () -> events.count(Type.STORE_ERROR, recordListener(), event) >= 3);
    assertThat(sends.runs(event)).isZero();
    assertThat(deadLettered(recordListener())).doesNotContain(event);

    store.down.set(false);
    await("the send once the store is back", () -> sends.of(event).size() == 1);
    assertRecorded(recordListener(), event);
    assertAcknowledged(recordListener());
    assertThat(deadLettered(recordListener())).doesNotContain(event);
  }

  @Test
  void theKeyComesFromTheIdempotencyKeyHeaderNeverFromTheBrokersMessageId() throws Exception {
    String key = unique("header-key");
    String first = unique("payload-a");
    String second = unique("payload-b");
    publish(headerListener(), first, key);
    await("the first send", () -> sends.of(first).size() == 1);
    publish(headerListener(), second, key);

    await("the replay", () -> events.count(Type.REPLAYED, headerListener(), key) == 1);
    assertThat(sends.runs(second)).as("same header, other message: not sent").isZero();
    assertThat(sends.of(first).get(0).providerKey())
        .isEqualTo(IdempotencyKey.providerKey(IdempotencyKey.of(headerListener(), key)));
    assertAcknowledged(headerListener());
  }

  @Test
  void aMessageWithoutItsKeyIsRefusedAndNeverRuns() throws Exception {
    String payload = unique("no-key");
    publish(headerListener(), payload, null);

    await(
        "the refused message dead-lettered",
        () -> deadLettered(headerListener()).contains(payload));
    assertThat(sends.runs(payload)).isZero();
  }

  @Test
  void aBatchRunsOnlyWhatWasNotSentAndSendsADuplicateInTheBatchOnce() throws Exception {
    if (batchListener() == null) {
      return;
    }
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
    if (batchListener() == null) {
      return;
    }
    String before = unique("b-before");
    String busy = unique("b-busy");
    String after = unique("b-after");
    CompletableFuture<String> elsewhere = new CompletableFuture<>();
    CountDownLatch release = holdInFlight(batchListener(), busy, elsewhere);
    try {
      publishBatch(List.of(before, busy, after));
      await("the message before the busy one", () -> sends.of(before).size() == 1);
      Thread.sleep(500); // the batch keeps coming back meanwhile
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
    if (batchListener() == null) {
      return;
    }
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
