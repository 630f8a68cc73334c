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

  @Autowired protected Sends sends;
  @Autowired Events events;
  @Autowired SwitchableKeyStore store;
  @Autowired IdempotencyGuard guard;
  @Autowired io.micrometer.core.instrument.MeterRegistry meters;

  /** The record listener's destination, operation name: {@code <broker>-record}. */
  protected abstract String recordListener();

  /** The record listener that dead-letters stored failures. */
  protected abstract String deadLetterListener();

  /** The operation of the listener that takes its key from the Idempotency-Key header. */
  protected abstract String headerListener();

  /** The listener whose key is {@link KeyEvaluations#keyOf}. */
  protected abstract String keyedListener();

  /**
   * How many deliveries a poison message gets before it is dead-lettered: 1 where the container
   * refuses it at once, the broker's redelivery limit where it only rolls back (JMS).
   */
  protected abstract int deliveriesOfAPoisonMessage();

  /** Publishes a text message for a listener, with an Idempotency-Key header if not null. */
  protected abstract void publish(String listener, String payload, String idempotencyKey)
      throws Exception;

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
    for (String outcome : List.of("sent", "replayed")) {
      assertThat(
              meters
                  .get("idempotency.calls")
                  .tag("operation", recordListener())
                  .tag("outcome", outcome)
                  .counter()
                  .count())
          .as("the metrics name the listener as the operation (" + outcome + ")")
          .isPositive();
    }
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

  @org.junit.jupiter.params.ParameterizedTest
  @org.junit.jupiter.params.provider.EnumSource(KeyEvaluations.Kind.class)
  void aMessageWhoseKeyCannotBeUsedIsAPoisonMessageDeadLetteredWithoutALoopAndNeverSent(
      KeyEvaluations.Kind kind) throws Exception {
    String payload = unique(kind.name());
    publish(keyedListener(), payload, null);

    int limit = deliveriesOfAPoisonMessage();
    await(
        "the poison message dead-lettered (or sent, or redelivered past " + limit + ")",
        () ->
            deadLettered(keyedListener()).contains(payload)
                || sends.runs(payload) > 0
                || KeyEvaluations.evaluations(payload) > limit);
    assertThat(sends.runs(payload)).as("the listener never ran").isZero();
    assertThat(deadLettered(keyedListener())).as("dead-lettered").contains(payload);
    assertThat(KeyEvaluations.evaluations(payload))
        .as("deliveries of the poison message")
        .isEqualTo(limit);
    assertThat(sends.runs(payload)).as("the listener never ran").isZero();
    assertAcknowledged(keyedListener());
    assertThat(KeyEvaluations.evaluations(payload)).as("no redelivery since").isEqualTo(limit);
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
}
