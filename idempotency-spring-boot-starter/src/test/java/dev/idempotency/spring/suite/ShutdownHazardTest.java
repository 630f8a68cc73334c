package dev.idempotency.spring.suite;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.MethodSource;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * SPEC 16, an application shutdown mid-send (its context closed, as on SIGTERM, which closes the
 * guard), on every entry point. A send runs through each entry point of a stack when its
 * application shuts down. The shutdown waits for the sends; each finishes, its outcome is recorded,
 * and the application started again on the same store replays it: one provider send per key,
 * nothing left in progress, nothing lost.
 *
 * <p>One application per stack, started on a store and a provider that outlive it, serves every
 * entry point of the stack at once (two starts per stack, not two per entry point).
 */
class ShutdownHazardTest extends HazardTest {

  @ParameterizedTest
  @EnumSource(Stack.class)
  void aShutdownMidSendFinishesEachSendAndTheRestartedApplicationReplaysIt(Stack stack)
      throws Exception {
    List<EntryPoint> entries = entryPoints().stream().filter(e -> e.stack() == stack).toList();
    SwitchableKeyStore store = new SwitchableKeyStore();
    SuiteProvider provider = new SuiteProvider();
    CountDownLatch closing = new CountDownLatch(1);
    ConfigurableApplicationContext first = stack.start(store, provider, closing);
    int port = Stack.port(first);
    CountDownLatch release = new CountDownLatch(1);
    CountDownLatch started = provider.hold(release, entries.size());
    Map<EntryPoint, String> keys = new LinkedHashMap<>();
    Map<EntryPoint, CompletableFuture<Answer>> answers = new LinkedHashMap<>();
    for (EntryPoint entry : entries) {
      String key = Waits.newKey(entry);
      keys.put(entry, key);
      answers.put(entry, CompletableFuture.supplyAsync(() -> call(entry, port, key)));
    }
    assertThat(started.await(Waits.SECONDS, TimeUnit.SECONDS)).as("every send started").isTrue();

    CompletableFuture<Void> closed = CompletableFuture.runAsync(first::close);
    assertThat(closing.await(Waits.SECONDS, TimeUnit.SECONDS)).as("the shutdown began").isTrue();
    assertThat(closed).as("the shutdown waits for the sends").isNotDone();
    release.countDown();
    closed.get(Waits.SECONDS, TimeUnit.SECONDS);
    provider.reset();
    for (EntryPoint entry : entries) {
      assertThat(provider.sends(keys.get(entry))).as(entry + ": its send finished").isEqualTo(1);
    }

    try (ConfigurableApplicationContext second = stack.start(store, provider, closing)) {
      for (EntryPoint entry : entries) {
        String key = keys.get(entry);
        Answer replay = entry.call(Stack.port(second), key, EntryPoint.PATIENT);
        assertThat(replay.status()).as(entry + ": " + replay).isEqualTo(200);
        assertThat(replay.body()).as(entry.toString()).contains("sent-" + key + "-1");
        assertThat(provider.sends(key)).as(entry + ": one provider send").isEqualTo(1);
        Answer answered = answers.get(entry).handle((value, failure) -> value).getNow(null);
        if (answered != null && answered.status() == 200) {
          assertThat(answered.body()).as(entry + ": the first answer").isEqualTo(replay.body());
        }
      }
    }
  }

  /**
   * On a listener: the application shuts down while a delivery's send runs; the shutdown waits for
   * it, its outcome is recorded, and the message published again to the restarted application (as a
   * producer's retry, or a redelivery) is a replay: one provider send, nothing dead-lettered.
   */
  @ParameterizedTest
  @MethodSource("dev.idempotency.spring.suite.HazardTest#listenerEntryPoints")
  void aShutdownMidDeliveryRecordsTheSendAndAfterTheRestartTheMessageIsAReplay(
      ListenerEntryPoint entry) throws Exception {
    SwitchableKeyStore store = new SwitchableKeyStore();
    SuiteProvider provider = new SuiteProvider();
    CountDownLatch closing = new CountDownLatch(1);
    String destination = "idem.suite." + UUID.randomUUID();
    String key = Waits.newKey(entry);
    CountDownLatch release = new CountDownLatch(1);
    CountDownLatch started = provider.hold(release, 1);
    ListenerApplication first = entry.start(store, provider, closing, destination);
    first.publish(key, key);
    assertThat(started.await(Waits.SECONDS, TimeUnit.SECONDS)).as("the send started").isTrue();

    CompletableFuture<Void> closed = CompletableFuture.runAsync(first::close);
    assertThat(closing.await(Waits.SECONDS, TimeUnit.SECONDS)).as("the shutdown began").isTrue();
    assertThat(closed).as("the shutdown waits for the send").isNotDone();
    release.countDown();
    closed.get(Waits.SECONDS, TimeUnit.SECONDS);
    provider.reset();
    assertThat(provider.sends(key)).as("its send finished").isEqualTo(1);

    try (ListenerApplication second =
        entry.start(store, provider, new CountDownLatch(1), destination)) {
      second.publish(key, key);
      Waits.await(
          "the message replayed",
          () -> second.events().count(Type.REPLAYED, entry.operation(), key) >= 1);
      second.awaitAcknowledged();
      assertThat(provider.sends(key)).as("one provider send").isEqualTo(1);
      assertThat(second.events().count(Type.CLAIMED, entry.operation(), key))
          .as("nothing claimed again after the restart")
          .isZero();
      assertThat(second.deadLettered()).isEmpty();
    }
  }

  private static Answer call(EntryPoint entry, int port, String key) {
    try {
      return entry.call(port, key, Duration.ofSeconds(Waits.SECONDS));
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }
}
