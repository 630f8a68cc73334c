package dev.idempotency.spring.suite;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.BatchDeliveryFailedException;
import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
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
 * Probe41 (adversarial review of kbatch40, SPEC 1): a batch {@code @IdempotentListener} that reads
 * its list from the last message to the first (an order the docs name) and fails at its first read,
 * the last message, naming it; and one that sends its whole list, then throws an exception that
 * names no message (documented: every key released, a second send on redelivery). The promise:
 * every message sent once.
 */
@Tag("open-finding")
class KafkaBatchReadOrderFailureProbeTest {

  static final String LISTENER = "probe41-kafka-batch-order";

  @Test
  void aListReadBackwardsWhoseLastMessageFailsFirstSendsEveryMessageOnce() throws Exception {
    assertEachSentOnce("backwards-last-fails");
  }

  @Test
  void aListSentWholeThenAGenericFailureSendsEveryMessageOnce() throws Exception {
    assertEachSentOnce("generic-after-all");
  }

  static void assertEachSentOnce(String mode) throws Exception {
    SuiteProvider provider = new SuiteProvider();
    String topic = "idem.probe41-order-" + UUID.randomUUID();
    try (KafkaListenerApplication application =
        KafkaListenerApplication.start(
            new SwitchableKeyStore(),
            provider,
            new CountDownLatch(1),
            topic,
            "none",
            new Class<?>[] {OrderListeners.class},
            "probe.mode=" + mode)) {
      String[] keys = new String[4];
      for (int i = 0; i < keys.length; i++) {
        keys[i] = "probe41-" + mode + "-" + i + "-" + UUID.randomUUID();
      }
      application.publishInOneBatch(keys);
      // the first delivery fails, and the batch comes back and is then committed whole
      application.awaitAcknowledged();
      Waits.await("the send of " + keys[3], () -> provider.sends(keys[3]) >= 1);
      int[] sends = new int[keys.length];
      for (int i = 0; i < keys.length; i++) {
        sends[i] = provider.sends(keys[i]);
      }
      assertThat(sends).as("provider sends of messages 0 to 3").containsExactly(1, 1, 1, 1);
    }
  }

  /** The probe's listener, added to the suite's Kafka application. */
  @Configuration(proxyBeanMethods = false)
  static class OrderListeners {
    @Bean
    OrderListener copyingListener(SuiteProvider provider, @Value("${probe.mode}") String mode) {
      return new OrderListener(provider, mode);
    }
  }

  /** Reads its list as {@code probe.mode} says; only its first delivery fails. */
  public static class OrderListener {
    private final SuiteProvider provider;
    private final String mode;
    private final AtomicBoolean failed = new AtomicBoolean();

    OrderListener(SuiteProvider provider, String mode) {
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
      if (mode.equals("backwards-last-fails")) {
        for (int i = payloads.size() - 1; i >= 0; i--) {
          String payload = payloads.get(i);
          if (i == payloads.size() - 1 && failed.compareAndSet(false, true)) {
            throw new BatchDeliveryFailedException(
                i, new IllegalStateException("the provider refused, try again"));
          }
          provider.send(payload);
        }
        return;
      }
      for (String payload : payloads) {
        provider.send(payload);
      }
      if (failed.compareAndSet(false, true)) {
        throw new IllegalStateException("a failure after the sends, naming no message");
      }
    }
  }
}
