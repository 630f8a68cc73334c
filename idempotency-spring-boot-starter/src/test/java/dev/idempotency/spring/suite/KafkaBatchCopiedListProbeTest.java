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
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.annotation.KafkaListener;

/**
 * Probe41 (adversarial review of kbatch40, SPEC 1): a batch {@code @IdempotentListener} that
 * touches its whole list without sending it (a defensive copy, {@code contains}), then sends it in
 * order and names its failed message by index. Every {@code get} of {@code HandedOutList} counts as
 * a read, and every read counts as sent, so the messages after the failed one, never sent, are
 * recorded as sent and replayed on redelivery: never sent at all (a lost send).
 */
@Tag("open-finding")
class KafkaBatchCopiedListProbeTest {

  static final String LISTENER = "probe41-kafka-batch-copy";

  @Test
  void aCopiedListWhoseSecondMessageFailsSendsEveryMessageOnce() throws Exception {
    assertEachSentOnce("copy");
  }

  @Test
  void aListCheckedWithContainsWhoseSecondMessageFailsSendsEveryMessageOnce() throws Exception {
    assertEachSentOnce("contains");
  }

  static void assertEachSentOnce(String mode) throws Exception {
    SuiteProvider provider = new SuiteProvider();
    String topic = "idem.probe41-batch-" + UUID.randomUUID();
    try (KafkaListenerApplication application =
        KafkaListenerApplication.start(
            new SwitchableKeyStore(),
            provider,
            new CountDownLatch(1),
            topic,
            "none",
            new Class<?>[] {CopyingListeners.class},
            "probe.mode=" + mode)) {
      String[] keys = new String[4];
      for (int i = 0; i < keys.length; i++) {
        keys[i] = "probe41-" + mode + "-" + i + "-" + UUID.randomUUID();
      }
      application.publishInOneBatch(keys);
      // the batch fails at message 1 once, comes back from there, and is then committed whole
      application.awaitAcknowledged();
      Waits.await("the send of " + keys[1], () -> provider.sends(keys[1]) >= 1);
      for (String key : keys) {
        assertThat(provider.sends(key)).as("sends of " + key).isEqualTo(1);
      }
    }
  }

  /** The probe's listener, added to the suite's Kafka application. */
  @Configuration(proxyBeanMethods = false)
  static class CopyingListeners {
    @Bean
    CopyingListener copyingListener(SuiteProvider provider, @Value("${probe.mode}") String mode) {
      return new CopyingListener(provider, mode);
    }
  }

  /** Touches its whole list first, then sends in order; message 1's first send fails. */
  public static class CopyingListener {
    private final SuiteProvider provider;
    private final String mode;
    private final AtomicBoolean failed = new AtomicBoolean();

    CopyingListener(SuiteProvider provider, String mode) {
      this.provider = provider;
      this.mode = mode;
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
