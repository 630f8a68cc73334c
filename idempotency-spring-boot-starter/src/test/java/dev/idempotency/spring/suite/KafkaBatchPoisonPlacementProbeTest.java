package dev.idempotency.spring.suite;

import dev.idempotency.spring.messaging.BatchDeliveryFailedException;
import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.function.IntPredicate;
import org.assertj.core.api.SoftAssertions;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.listener.adapter.RecordFilterStrategy;

/**
 * Probe (probeS) of fixpoison (b5ba4f1) on the in-JVM Kafka broker: a batch listener behind a
 * {@code RecordFilterStrategy} (it drops payloads starting with {@code filtered|}), keyed by {@code
 * #payload.split('\|')[1]}, which SpEL cannot work out for a payload without {@code |} (a poison
 * message: the application's handler recovers it at once to its dead-letter topic). The poison
 * message comes first, last, or right after a filtered record. The promise (SPEC 1, 15): each keyed
 * message is sent once, the poison one is dead-lettered, a filtered one neither sent nor
 * dead-lettered.
 */
@Tag("extended") // 30 to 45 s a Boot line; passes on Boot 3.5 and 4.0
class KafkaBatchPoisonPlacementProbeTest {

  static final String LISTENER = "probe-s-kafka-batch-poison-placement";

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
            "idem.probe-s-batch-poison-" + UUID.randomUUID(),
            "none",
            new Class<?>[] {PlacementListeners.class});
  }

  @AfterAll
  static void stop() {
    if (application != null) {
      application.close();
    }
  }

  @Test
  void aPoisonMessageFirstLeavesTheOthersSentOnce() throws Exception {
    check(application, provider, "poison", "keyed", "keyed");
  }

  @Test
  void aPoisonMessageLastLeavesTheOthersSentOnce() throws Exception {
    check(application, provider, "keyed", "keyed", "poison");
  }

  @Test
  void aPoisonMessageRightAfterAFilteredOneLeavesTheOthersSentOnce() throws Exception {
    check(application, provider, "keyed", "filtered", "poison", "keyed");
  }

  @Test
  void aPoisonMessageAfterAFilteredFirstLeavesTheOthersSentOnce() throws Exception {
    check(application, provider, "filtered", "poison", "keyed", "poison", "keyed");
  }

  /**
   * Publishes one batch of the given shapes, waits until its keyed messages were sent and its
   * poison ones dead-lettered (or a marker published behind it was sent), and checks each message.
   */
  static void check(KafkaListenerApplication application, SuiteProvider provider, String... shapes)
      throws Exception {
    String[] payloads = new String[shapes.length];
    String run = UUID.randomUUID().toString();
    for (int i = 0; i < shapes.length; i++) {
      payloads[i] =
          switch (shapes[i]) {
            case "poison" -> "no-bar-" + i + "-" + run;
            case "filtered" -> "filtered|" + i + "-" + run;
            default -> "order|" + i + "-" + run;
          };
    }
    application.publishInOneBatch(payloads, payloads);
    IntPredicate keyed = i -> shapes[i].equals("keyed");
    IntPredicate poison = i -> shapes[i].equals("poison");
    try {
      Waits.await(
          "the keyed messages sent and the poison ones dead-lettered, or one sent twice",
          () -> {
            if (Arrays.stream(payloads).anyMatch(payload -> provider.sends(payload) >= 2)) {
              return true; // a loop: the assertions say what happened
            }
            List<String> deadLettered = application.deadLettered();
            for (int i = 0; i < shapes.length; i++) {
              if (keyed.test(i) && provider.sends(payloads[i]) < 1) {
                return false;
              }
              if (poison.test(i) && !deadLettered.contains(payloads[i])) {
                return false;
              }
            }
            return true;
          });
    } catch (AssertionError timedOut) {
      // the assertions say what happened
    }
    // a redelivery of any of them comes before a marker published behind them (unless looping)
    String marker = "order|marker-" + run;
    application.publishInOneBatch(marker);
    try {
      Waits.await(
          "the marker sent, or a message sent twice",
          () ->
              provider.sends(marker) >= 1
                  || Arrays.stream(payloads).anyMatch(payload -> provider.sends(payload) >= 2));
    } catch (AssertionError timedOut) {
      // the assertions say what happened
    }
    List<String> deadLettered = new ArrayList<>(application.deadLettered());
    deadLettered.retainAll(Arrays.asList(payloads));
    String facts =
        "shapes "
            + Arrays.toString(shapes)
            + ", sends: "
            + Arrays.stream(payloads).map(provider::sends).toList()
            + ", dead-lettered: "
            + deadLettered;
    SoftAssertions.assertSoftly(
        softly -> {
          for (int i = 0; i < shapes.length; i++) {
            softly
                .assertThat(provider.sends(payloads[i]))
                .as("sends of message " + i + " (" + facts + ")")
                .isEqualTo(keyed.test(i) ? 1 : 0);
            softly
                .assertThat(deadLettered.contains(payloads[i]))
                .as("message " + i + " dead-lettered (" + facts + ")")
                .isEqualTo(poison.test(i));
          }
        });
  }

  /** The listener and its filter, added to the suite's Kafka application. */
  @Configuration(proxyBeanMethods = false)
  static class PlacementListeners {
    @Bean
    PlacementListener placementListener(SuiteProvider provider) {
      return new PlacementListener(provider);
    }

    @Bean
    RecordFilterStrategy<String, String> skipFiltered() {
      return record -> record.value() != null && record.value().startsWith("filtered|");
    }
  }

  /** Sends each payload of its list, in order, naming a failed send. */
  public static class PlacementListener {
    private final SuiteProvider provider;

    PlacementListener(SuiteProvider provider) {
      this.provider = provider;
    }

    @KafkaListener(
        id = LISTENER,
        topics = "${suite.kafka.topic}",
        groupId = "${suite.kafka.topic}",
        batch = "true",
        filter = "skipFiltered")
    @IdempotentListener(name = LISTENER, key = "#payload.split('\\|')[1]")
    public void batch(List<String> payloads) {
      for (int i = 0; i < payloads.size(); i++) {
        try {
          provider.send(payloads.get(i));
        } catch (RuntimeException failure) {
          throw new BatchDeliveryFailedException(i, failure);
        }
      }
    }
  }
}
