package dev.idempotency.spring.suite;

import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.util.Arrays;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.function.BooleanSupplier;
import java.util.function.IntSupplier;
import java.util.function.ToIntFunction;

/**
 * The four-message batch of the {@code KafkaBatchHeldBack*} probes: a Kafka application with the
 * probe's listener, the four messages published in one record batch (each key its own payload), and
 * what became of them (each key's sends, the listener's calls, the dead letters).
 */
final class HeldBackBatch implements AutoCloseable {

  final KafkaListenerApplication application;
  final SuiteProvider provider;

  /** The application's store (a probe may start another application on it). */
  final SwitchableKeyStore store;

  final String[] keys = new String[4];
  private final IntSupplier calls;

  private HeldBackBatch(
      KafkaListenerApplication application,
      SuiteProvider provider,
      SwitchableKeyStore store,
      IntSupplier calls) {
    this.application = application;
    this.provider = provider;
    this.store = store;
    this.calls = calls;
  }

  /**
   * Starts an application on a new topic named after {@code name} with {@code listeners} (a
   * configuration whose listener bean is of type {@code listener}, counted by {@code calls}) and
   * {@code properties}, and publishes four messages in one batch: message {@code odd} keyed {@code
   * oddPrefix}-..., the others {@code name}-....
   */
  static <L> HeldBackBatch publish(
      String name,
      int odd,
      String oddPrefix,
      Class<?> listeners,
      Class<L> listener,
      ToIntFunction<L> calls,
      String... properties)
      throws Exception {
    SuiteProvider provider = new SuiteProvider();
    SwitchableKeyStore store = new SwitchableKeyStore();
    KafkaListenerApplication application =
        KafkaListenerApplication.start(
            store,
            provider,
            new CountDownLatch(1),
            "idem." + name + "-" + UUID.randomUUID(),
            "none",
            new Class<?>[] {listeners},
            properties);
    try {
      L bean = application.context().getBean(listener);
      HeldBackBatch batch =
          new HeldBackBatch(application, provider, store, () -> calls.applyAsInt(bean));
      for (int i = 0; i < batch.keys.length; i++) {
        batch.keys[i] = (i == odd ? oddPrefix : name + "-") + i + "-" + UUID.randomUUID();
      }
      application.publishInOneBatch(batch.keys);
      return batch;
    } catch (Exception | Error e) {
      application.close();
      throw e;
    }
  }

  /** How often the listener ran. */
  int calls() {
    return calls.getAsInt();
  }

  /** The sends of each of the four, in order. */
  List<Integer> sends() {
    return Arrays.stream(keys).map(provider::sends).toList();
  }

  /**
   * Waits until {@code condition} holds or the suite's wait is over, and goes on either way: the
   * assertions that follow say what happened.
   */
  void awaitOrGoOn(String what, BooleanSupplier condition) throws InterruptedException {
    try {
      Waits.await(what, condition);
    } catch (AssertionError timedOut) {
      // neither: the assertions say what happened
    }
  }

  /** What an assertion's description shows: calls, sends and dead letters. */
  String facts() {
    return "listener calls: "
        + calls()
        + ", sends of the four: "
        + sends()
        + ", dead-lettered: "
        + application.deadLettered();
  }

  @Override
  public void close() {
    application.close();
  }
}
