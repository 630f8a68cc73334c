package dev.idempotency.spring.suite;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.BatchDeliveryFailedException;
import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.annotation.KafkaListener;

/**
 * A batch {@code @IdempotentListener} that touches its whole list without sending it (a defensive
 * copy, {@code contains}), then sends it in order and names its failed message by index: every
 * message is sent once. Found by the probe41 re-probe: counting every message read as sent
 * (kbatch40's fix of out-of-order reads) recorded the messages after the failed one as sent, never
 * sent, and the redelivery replayed them (a lost send); the messages before the failed one count,
 * as Spring Kafka's index means. One application for the class; each test sets the listener's mode.
 */
class KafkaBatchCopiedListTest {

  static final String LISTENER = "probe41-kafka-batch-copy";

  private static SuiteProvider provider;
  private static KafkaListenerApplication application;
  private static CopyingListener listener;

  @BeforeAll
  static void start() {
    provider = new SuiteProvider();
    application =
        KafkaListenerApplication.start(
            new SwitchableKeyStore(),
            provider,
            new CountDownLatch(1),
            "idem.probe41-batch-" + UUID.randomUUID(),
            "none",
            new Class<?>[] {CopyingListeners.class});
    listener = application.context().getBean(CopyingListener.class);
  }

  @AfterAll
  static void stop() {
    if (application != null) {
      application.close();
    }
  }

  @Test
  void aCopiedListWhoseSecondMessageFailsSendsEveryMessageOnce() throws Exception {
    assertEachSentOnce("copy");
  }

  @Test
  void aListCheckedWithContainsWhoseSecondMessageFailsSendsEveryMessageOnce() throws Exception {
    assertEachSentOnce("contains");
  }

  /** Publishes four messages in one batch to the listener in {@code mode}: each is sent once. */
  private static void assertEachSentOnce(String mode) throws Exception {
    listener.mode(mode);
    String[] keys = new String[4];
    for (int i = 0; i < keys.length; i++) {
      keys[i] = "probe41-" + mode + "-" + i + "-" + UUID.randomUUID();
    }
    application.publishInOneBatch(keys);
    // the batch fails at message 1 once, comes back from there, and is then committed whole
    application.awaitAcknowledged();
    Waits.await("the send of " + keys[1], () -> provider.sends(keys[1]) >= 1);
    assertThat(listener.failedOnce()).as("the listener's first delivery failed").isTrue();
    for (String key : keys) {
      assertThat(provider.sends(key)).as("sends of " + key).isEqualTo(1);
    }
  }

  /** The probe's listener, added to the suite's Kafka application. */
  @Configuration(proxyBeanMethods = false)
  static class CopyingListeners {
    @Bean
    CopyingListener copyingListener(SuiteProvider provider) {
      return new CopyingListener(provider);
    }
  }

  /** Touches its whole list first, then sends in order; message 1's first send in a mode fails. */
  public static class CopyingListener {
    private final SuiteProvider provider;
    private final AtomicBoolean failed = new AtomicBoolean();
    private volatile String mode = "";

    CopyingListener(SuiteProvider provider) {
      this.provider = provider;
    }

    void mode(String mode) {
      this.mode = mode;
      failed.set(false);
    }

    boolean failedOnce() {
      return failed.get();
    }

    @KafkaListener(
        id = LISTENER,
        topics = "${suite.kafka.topic}",
        groupId = "${suite.kafka.topic}",
        batch = "true")
    @IdempotentListener(name = LISTENER)
    public void batch(List<String> payloads) {
      List<String> toSend = payloads;
      if (mode.equals("copy")) {
        toSend = new ArrayList<>(payloads); // a defensive copy, as many listeners make
      } else if (payloads.contains("poison")) { // a check over the batch, before any send
        return;
      }
      for (int i = 0; i < toSend.size(); i++) {
        String payload = toSend.get(i);
        if (i == 1 && failed.compareAndSet(false, true)) { // the first delivery only
          throw new BatchDeliveryFailedException(
              1, new IllegalStateException("the provider refused, try again"));
        }
        provider.send(payload);
      }
    }
  }
}
