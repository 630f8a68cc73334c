package dev.idempotency.spring.suite;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.SwitchableKeyStore;
import dev.idempotency.spring.suite.KafkaBatchPoisonPlacementProbeTest.PlacementListener;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.listener.adapter.RecordFilterStrategy;

/**
 * {@link KafkaBatchPoisonTransactionProbeTest}'s batch {@code [keyed, poison, keyed, keyed]} in a
 * Kafka container transaction, checked for what the starter promises there (SPEC 1): no message is
 * sent twice, none skipped unsent, the poison one never dead-lettered in a transaction that rolls
 * back. Before the fix (fixkafkatx) message 0 was sent at every delivery ("sends: [3, 0, 0, 0]" on
 * Boot 3.5, "[4, 0, 0, 0]" on Boot 4.0, when the wait ended at a second send; 339 in 90 s): the
 * poison message was reported at its index, the error handler recovered it and threw to seek the
 * records after it, which rolled the transaction back and released message 0's key. Now the batch
 * comes back whole as a deferral before anything is claimed or sent: it stalls there, with the
 * deferrals' backoff (the stall itself stays open in {@link KafkaBatchPoisonTransactionProbeTest}).
 */
@Tag("extended") // 20 to 40 s a Boot line: its own application with a Kafka transaction manager
class KafkaBatchPoisonTransactionTest {

  /** How often the container's filter saw each payload: one per delivery of its batch. */
  static final Map<String, AtomicInteger> DELIVERIES = new ConcurrentHashMap<>();

  private static SuiteProvider provider;
  private static KafkaListenerApplication application;

  @BeforeAll
  static void start() {
    provider = new SuiteProvider();
    application =
        KafkaListenerApplication.start(
            new SwitchableKeyStore(),
            provider,
            new CountDownLatch(1),
            "idem.batch-poison-tx-" + UUID.randomUUID(),
            "none",
            new Class<?>[] {CountedListeners.class},
            "spring.kafka.producer.transaction-id-prefix=batch-poison-tx-" + UUID.randomUUID(),
            "spring.kafka.consumer.isolation-level=read-committed");
  }

  @AfterAll
  static void stop() {
    if (application != null) {
      application.close();
    }
  }

  @Test
  void aPoisonMessageInTheMiddleSendsNothingTwiceAndDeadLettersNothingRolledBack()
      throws Exception {
    String run = UUID.randomUUID().toString();
    String[] payloads = {
      "order|0-" + run, "no-bar-1-" + run, "order|2-" + run, "order|3-" + run,
    };
    application.publishInOneBatch(payloads, payloads);
    // three deliveries of the batch: it came back twice, each time after a rollback (before the
    // fix, message 0 was sent at each)
    Waits.await(
        "three deliveries of the batch, or a message sent twice",
        () ->
            deliveries(payloads[0]) >= 3
                || Arrays.stream(payloads).anyMatch(payload -> provider.sends(payload) >= 2));
    List<String> deadLettered = new ArrayList<>(application.deadLettered());
    deadLettered.retainAll(Arrays.asList(payloads));
    List<Integer> sends = Arrays.stream(payloads).map(provider::sends).toList();
    String facts =
        "deliveries: "
            + deliveries(payloads[0])
            + ", sends: "
            + sends
            + ", dead-lettered: "
            + deadLettered;
    assertThat(sends).as("sends of the four (" + facts + ")").containsExactly(0, 0, 0, 0);
    assertThat(deadLettered).as("dead-lettered (" + facts + ")").isEmpty();
  }

  private static int deliveries(String payload) {
    AtomicInteger count = DELIVERIES.get(payload);
    return count == null ? 0 : count.get();
  }

  /** {@link KafkaBatchPoisonPlacementProbeTest}'s listener, its filter counting deliveries. */
  @Configuration(proxyBeanMethods = false)
  static class CountedListeners {
    @Bean
    PlacementListener placementListener(SuiteProvider provider) {
      return new PlacementListener(provider);
    }

    @Bean
    RecordFilterStrategy<String, String> skipFiltered() {
      return record -> {
        if (record.value() != null) {
          DELIVERIES
              .computeIfAbsent(record.value(), value -> new AtomicInteger())
              .incrementAndGet();
        }
        return record.value() != null && record.value().startsWith("filtered|");
      };
    }
  }
}
