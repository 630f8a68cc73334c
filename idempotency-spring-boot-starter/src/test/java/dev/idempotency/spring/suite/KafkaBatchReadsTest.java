package dev.idempotency.spring.suite;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.spring.messaging.BatchDeliveryFailedException;
import dev.idempotency.spring.messaging.Events;
import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.annotation.KafkaListener;

/**
 * A batch {@code @IdempotentListener} on the suite's Kafka application that reads the list it got
 * in ways other than once, in order, before it returns (found by probe37e, issue 37). The promise
 * (SPEC 1, 15): a republished message is a replay, never a second send; a message is never counted
 * as sent when it was not, and a read the batch can no longer honour fails at once, saying so.
 */
class KafkaBatchReadsTest {

  static final String LISTENER = "probe-kafka-batch-reads";

  /**
   * The listener reads and sends the first message, keeps a view of the rest ({@code subList}) and
   * reads it on another thread once the first message's outcome was recorded (after the listener
   * returned), as an application handing the tail of a batch to a worker would. The container
   * acknowledged the whole batch when the listener returned (as Spring Kafka does for any batch
   * listener that returns normally), so the late read fails at once with an error that says the
   * message was not sent and its key released, rather than a deferral that no container sees; a
   * republished copy of each unread message is then sent, once, and the first one is a replay.
   */
  @Test
  void aSubListReadAfterTheListenerReturnedFailsAtOnceAndItsMessagesAreSentWhenRepublished()
      throws Exception {
    SuiteProvider provider = new SuiteProvider();
    String topic = "idem.probe-batch-" + UUID.randomUUID();
    try (KafkaListenerApplication application =
        KafkaListenerApplication.start(
            new SwitchableKeyStore(),
            provider,
            new CountDownLatch(1),
            topic,
            "none",
            new Class<?>[] {ReadingListeners.class},
            "probe.mode=later")) {
      ReadingListener listener = application.context().getBean(ReadingListener.class);
      String[] keys = new String[4];
      for (int i = 0; i < keys.length; i++) {
        keys[i] = "probe-later-" + i + "-" + UUID.randomUUID();
      }
      application.publishInOneBatch(keys);
      application.awaitAcknowledged();
      Waits.await("the late read", listener::done);
      assertThat(listener.failures())
          .as("what the worker's late read threw")
          .singleElement()
          .isInstanceOf(IllegalStateException.class)
          .extracting(Throwable::getMessage)
          .asString()
          .contains("Listener " + LISTENER + " read message 1 of its batch after its call ended")
          .contains("it was not sent by this delivery, and its key was released")
          .contains("Read the list within the listener");
      assertThat(provider.sends(keys[0])).as("sends of the message read in time").isEqualTo(1);
      for (int i = 1; i < keys.length; i++) {
        assertThat(provider.sends(keys[i])).as("sends of unread message " + i).isZero();
      }

      // the producer retries: each message is published again
      for (String key : keys) {
        application.publish(key, key);
      }
      application.awaitAcknowledged();
      Events events = application.events();
      Waits.await(
          "the replay of " + keys[0], () -> events.count(Type.REPLAYED, LISTENER, keys[0]) >= 1);
      for (int i = 1; i < keys.length; i++) {
        String key = keys[i];
        Waits.await("the send of " + key, () -> provider.sends(key) >= 1);
      }
      for (String key : keys) {
        assertThat(provider.sends(key)).as("sends of " + key + " after its repeat").isEqualTo(1);
      }
    }
  }

  /**
   * The listener sends its list from the last message to the first, and the first message's send
   * fails once: it throws {@code BatchDeliveryFailedException(0, cause)}, naming the message that
   * failed, after the later ones were read and sent. The redelivery must send the first message and
   * replay the others.
   *
   * <p>Open finding (issue 37), left open: no design the starter can have gives it. The later
   * messages are sent a second time. Counting every message read as sent (kbatch40) fixed it, and
   * lost the sends of a listener that copies its list before sending and names a failed message
   * (probe41, branch {@code probe41}): reverted. A narrower rule (count as sent the messages after
   * the named one that were read before it, fixkafka's evaluation) passes this case and {@link
   * KafkaBatchCopiedListTest}, and still loses sends: the starter sees reads, never sends, and this
   * listener's reads (3, 2, 1, 0, then {@code BatchDeliveryFailedException(0)}) are exactly those
   * of a listener that checks its list from the last message to the first, then sends from message
   * 0 and fails there, having sent nothing. One observation, two truths: recording 1 to 3 loses the
   * second listener's three sends; releasing them (what the starter does, as Spring Kafka's index
   * means) sends this listener's three again. Only a signal of each send's end could tell them
   * apart, and a batch listener sends through its own client, not through the guard.
   */
  @Test
  @Tag("open-finding")
  void aListSentBackwardsWhoseFirstMessageFailsSendsTheOthersOnce() throws Exception {
    assertEachSentOnceThenReplayed("backwards-first-fails");
  }

  static void assertEachSentOnceThenReplayed(String mode) throws Exception {
    SuiteProvider provider = new SuiteProvider();
    String topic = "idem.probe-batch-" + UUID.randomUUID();
    try (KafkaListenerApplication application =
        KafkaListenerApplication.start(
            new SwitchableKeyStore(),
            provider,
            new CountDownLatch(1),
            topic,
            "none",
            new Class<?>[] {ReadingListeners.class},
            "probe.mode=" + mode)) {
      ReadingListener listener = application.context().getBean(ReadingListener.class);
      String[] keys = new String[4];
      for (int i = 0; i < keys.length; i++) {
        keys[i] = "probe-" + mode + "-" + i + "-" + UUID.randomUUID();
      }
      application.publishInOneBatch(keys);
      application.awaitAcknowledged();
      for (String key : keys) {
        Waits.await("a send of " + key, () -> provider.sends(key) >= 1 || listener.done());
      }
      Waits.await("the listener's reads", listener::done);
      for (String key : keys) {
        assertThat(provider.sends(key)).as("sends of acknowledged message " + key).isEqualTo(1);
      }
      assertThat(listener.failures()).as("what the listener's reads threw").isEmpty();

      // the producer retries: each message is published again
      for (String key : keys) {
        application.publish(key, key);
      }
      application.awaitAcknowledged();
      Events events = application.events();
      for (String key : keys) {
        Waits.await(
            "the replay of " + key,
            () -> events.count(Type.REPLAYED, LISTENER, key) >= 1 || provider.sends(key) > 1);
        assertThat(provider.sends(key)).as("sends of " + key + " after its repeat").isEqualTo(1);
      }
    }
  }

  /** The probe's listener, added to the suite's Kafka application. */
  @Configuration(proxyBeanMethods = false)
  static class ReadingListeners {
    @Bean
    ReadingListener readingListener(SuiteProvider provider, @Value("${probe.mode}") String mode) {
      return new ReadingListener(provider, mode);
    }
  }

  /** Reads its batch as {@code probe.mode} says and sends each payload through the provider. */
  public static class ReadingListener {
    private final SuiteProvider provider;
    private final String mode;
    private final List<Throwable> failures = new CopyOnWriteArrayList<>();
    private final CountDownLatch done = new CountDownLatch(1);
    private final java.util.concurrent.atomic.AtomicInteger calls =
        new java.util.concurrent.atomic.AtomicInteger();
    private final java.util.Set<String> failedOnce =
        java.util.concurrent.ConcurrentHashMap.newKeySet();
    private volatile Events events;

    ReadingListener(SuiteProvider provider, String mode) {
      this.provider = provider;
      this.mode = mode;
    }

    @org.springframework.beans.factory.annotation.Autowired
    void events(Events events) {
      this.events = events;
    }

    boolean done() {
      return done.getCount() == 0;
    }

    List<Throwable> failures() {
      return failures;
    }

    @KafkaListener(
        id = LISTENER,
        topics = "${suite.kafka.topic}",
        groupId = "${suite.kafka.topic}",
        batch = "true")
    @IdempotentListener(name = LISTENER)
    public void batch(List<String> payloads) {
      if (payloads.isEmpty()) {
        return;
      }
      if (mode.equals("later") && calls.getAndIncrement() == 0) {
        String first = payloads.get(0);
        provider.send(first);
        List<String> rest = payloads.subList(1, payloads.size());
        Thread worker =
            new Thread(
                () -> {
                  try {
                    Waits.await(
                        "the first message's outcome",
                        () -> events.count(Type.COMPLETED, LISTENER, first) >= 1);
                    for (String payload : rest) {
                      provider.send(payload);
                    }

                  } catch (Throwable failure) {
                    failures.add(failure);
                  } finally {
                    done.countDown();
                  }
                });
        worker.start();
        return;
      }
      List<String> read = new ArrayList<>();
      for (int i = payloads.size() - 1; i >= 0; i--) {
        String payload = payloads.get(i);
        if (i == 0 && mode.equals("backwards-first-fails") && failedOnce.add(payload)) {
          throw new BatchDeliveryFailedException(
              0, new IllegalStateException("the provider refused, try again"));
        }
        provider.send(payload);
        read.add(payload);
      }
      for (String payload : payloads) {
        if (!read.contains(payload)) {
          failures.add(new AssertionError("read again, not read before: " + payload));
        }
      }
      done.countDown();
    }
  }
}
