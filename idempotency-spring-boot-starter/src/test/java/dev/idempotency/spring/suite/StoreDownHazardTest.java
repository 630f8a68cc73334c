package dev.idempotency.spring.suite;

import static dev.idempotency.spring.suite.Stack.PROVIDER;
import static dev.idempotency.spring.suite.Stack.STORE;
import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyEvent.Type;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * SPEC 16, a store that is down, on every entry point:
 *
 * <ul>
 *   <li>down at the call: refused (503), nothing sent; once it answers again, one send, and a
 *       repeat replays it; on a listener, each delivery refused by the store is redelivered (never
 *       acknowledged, never dead-lettered), one send once the store answers, and a republished
 *       message is a replay;
 *   <li>down in the middle of a send, and back before the send ends (the lease's renewal met the
 *       outage): the send's outcome is recorded, one send, the repeat replays it (on a listener:
 *       the delivery acknowledged, a republished message replayed).
 * </ul>
 */
class StoreDownHazardTest extends HazardTest {

  @ParameterizedTest
  @MethodSource("dev.idempotency.spring.suite.HazardTest#entryPoints")
  void aStoreDownAtTheCallSendsNothingThenOnceItAnswersSendsOnce(EntryPoint entry)
      throws Exception {
    String key = Waits.newKey(entry);
    STORE.down.set(true);
    Answer down = entry.call(key);
    assertThat(down.status()).as(down.toString()).isEqualTo(503);
    assertThat(PROVIDER.sends(key)).isZero();

    STORE.down.set(false);
    Answer up = Waits.callUntil(() -> entry.call(key), answer -> answer.status() == 503);
    assertThat(up.status()).as(up.toString()).isEqualTo(200);
    assertThat(PROVIDER.sends(key)).isEqualTo(1);
    Answer replay = entry.call(key);
    assertThat(replay.body()).isEqualTo(up.body());
    assertThat(PROVIDER.sends(key)).as("the repeat replays").isEqualTo(1);
  }

  @ParameterizedTest
  @MethodSource("dev.idempotency.spring.suite.HazardTest#entryPoints")
  void aStoreDownMidSendAndBackBeforeItEndsRecordsTheOutcome(EntryPoint entry) throws Exception {
    String key = Waits.newKey(entry);
    CountDownLatch release = new CountDownLatch(1);
    CountDownLatch started = PROVIDER.hold(release, 1);
    CompletableFuture<Answer> first = CompletableFuture.supplyAsync(() -> call(entry, key));
    assertThat(started.await(Waits.SECONDS, TimeUnit.SECONDS)).as("the send started").isTrue();

    int refusedBefore = STORE.refused.get();
    STORE.down.set(true);
    Waits.await(
        "the lease's renewal to meet the outage", () -> STORE.refused.get() > refusedBefore);
    STORE.down.set(false);
    release.countDown();

    Answer answer = first.get(Waits.SECONDS, TimeUnit.SECONDS);
    assertThat(answer.status()).as(answer.toString()).isEqualTo(200);
    assertThat(answer.body()).contains("sent-" + key + "-1");
    Answer repeat = Waits.callUntil(() -> entry.call(key), Answer::inProgress);
    assertThat(repeat.body()).as("the repeat replays").isEqualTo(answer.body());
    assertThat(PROVIDER.sends(key)).as("one provider send").isEqualTo(1);
  }

  @ParameterizedTest
  @MethodSource("dev.idempotency.spring.suite.HazardTest#listenerEntryPoints")
  void aStoreDownAtTheDeliveryLeavesItUnacknowledgedThenOnceItAnswersSendsOnce(
      ListenerEntryPoint entry) throws Exception {
    ListenerApplication application = entry.shared();
    String key = Waits.newKey(entry);
    STORE.down.set(true);
    application.publish(key, key);
    Waits.await(
        "three deliveries refused by the store",
        () -> application.events().count(Type.STORE_ERROR, entry.operation(), key) >= 3);
    assertThat(PROVIDER.sends(key)).isZero();
    assertThat(application.deadLettered())
        .as("not dead-lettered for an outage")
        .doesNotContain(key);

    STORE.down.set(false);
    Waits.await("the send once the store answers", () -> PROVIDER.sends(key) == 1);
    application.awaitAcknowledged();
    application.publish(key, key);
    Waits.await(
        "the repeat replayed",
        () -> application.events().count(Type.REPLAYED, entry.operation(), key) == 1);
    application.awaitAcknowledged();
    assertThat(PROVIDER.sends(key)).as("one provider send").isEqualTo(1);
    assertThat(application.deadLettered()).doesNotContain(key);
  }

  @ParameterizedTest
  @MethodSource("dev.idempotency.spring.suite.HazardTest#listenerEntryPoints")
  void aStoreDownMidDeliveryAndBackBeforeItEndsRecordsTheOutcome(ListenerEntryPoint entry)
      throws Exception {
    ListenerApplication application = entry.shared();
    String key = Waits.newKey(entry);
    CountDownLatch release = new CountDownLatch(1);
    CountDownLatch started = PROVIDER.hold(release, 1);
    application.publish(key, key);
    assertThat(started.await(Waits.SECONDS, TimeUnit.SECONDS)).as("the send started").isTrue();

    int refusedBefore = STORE.refused.get();
    STORE.down.set(true);
    Waits.await(
        "the lease's renewal to meet the outage", () -> STORE.refused.get() > refusedBefore);
    STORE.down.set(false);
    release.countDown();

    Waits.await(
        "the outcome recorded",
        () -> application.events().count(Type.COMPLETED, entry.operation(), key) == 1);
    application.awaitAcknowledged();
    application.publish(key, key);
    Waits.await(
        "the repeat replayed",
        () -> application.events().count(Type.REPLAYED, entry.operation(), key) == 1);
    application.awaitAcknowledged();
    assertThat(PROVIDER.sends(key)).as("one provider send").isEqualTo(1);
    assertThat(application.deadLettered()).doesNotContain(key);
  }

  private static Answer call(EntryPoint entry, String key) {
    try {
      return entry.call(entry.stack().sharedPort(), key, Duration.ofSeconds(Waits.SECONDS));
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }
}
