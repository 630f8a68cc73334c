package dev.idempotency.spring.messaging.kafka;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.EmbeddedKafka;
import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import dev.idempotency.spring.messaging.Polling;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.NewTopic;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.config.KafkaListenerEndpointRegistry;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.listener.BatchListenerFailedException;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * probeX, of fixchunk 9233c894 (a batch call's kept deferral is told by its operation and its
 * elements' keys), on the shared in-JVM KRaft broker: an unguarded batch listener sends its batch
 * in chunks through an {@code @IdempotentListener} batch method, catching what each call throws.
 * Two shapes the fix's rule must get right: chunks whose keys overlap (the first deferred, the
 * second, sharing a key with it, sent), and a chunk whose call failed after part of it was sent,
 * retried by the listener over the same keys. Every message must be sent once (SPEC 1, 15).
 */
@SpringBootTest(
    classes = KafkaProbeXChunksProbeTest.App.class,
    properties = {
      "spring.kafka.consumer.auto-offset-reset=earliest",
      "idempotency.in-flight-wait=50ms",
      "idempotency.messaging.back-off.initial=50ms",
      "idempotency.messaging.back-off.max=300ms"
    })
@DirtiesContext
class KafkaProbeXChunksProbeTest {

  static final String OVERLAP_TOPIC = "idem.probex.overlapping-chunks";
  static final String PARTIAL_TOPIC = "idem.probex.partial-chunk";
  static final String OVERLAP_ID = "probex-overlapping-chunks";
  static final String PARTIAL_ID = "probex-partial-chunk";

  static final List<String> sent = new CopyOnWriteArrayList<>();

  /** The batches each listener got, in order. */
  static final List<List<String>> batches = new CopyOnWriteArrayList<>();

  /** Events whose first chunk, on its first delivery only, finds the store down. */
  static final Set<String> outageFor = ConcurrentHashMap.newKeySet();

  /** Events whose send fails once, named by index (the messages before it were sent). */
  static final Set<String> failOnce = ConcurrentHashMap.newKeySet();

  /** What the listeners caught, in order. */
  static final List<String> caught = new CopyOnWriteArrayList<>();

  static long sends(String event) {
    return sent.stream().filter(event::equals).count();
  }

  /** The guarded batch sends, keyed by each payload. */
  public static class ChunkNotifier {
    @IdempotentListener(name = "probex-chunk-notify", key = "#payload")
    public void notifyChunk(List<String> events) {
      sent.addAll(events);
    }

    /** Sends each event in order; one in {@link #failOnce} fails once, named by its index. */
    @IdempotentListener(name = "probex-partial-notify", key = "#payload")
    public void notifyPartly(List<String> events) {
      for (int i = 0; i < events.size(); i++) {
        String event = events.get(i);
        if (failOnce.remove(event)) {
          throw new BatchListenerFailedException("the provider failed for " + event + " (test)", i);
        }
        sent.add(event);
      }
    }
  }

  /** Unguarded batch listeners calling the notifier per chunk. */
  public static class ChunkingListeners {
    private final ChunkNotifier notifier;
    private final SwitchableKeyStore store;

    ChunkingListeners(ChunkNotifier notifier, SwitchableKeyStore store) {
      this.notifier = notifier;
      this.store = store;
    }

    /**
     * Chunks of two overlapping by one ([e0, e1], [e1, e2], ...): the store is down for the first
     * chunk of an event in {@link #outageFor} on its first delivery (caught); every other call is
     * retried (bounded) until it returns.
     */
    @KafkaListener(id = OVERLAP_ID, topics = OVERLAP_TOPIC, batch = "true", autoStartup = "false")
    public void overlapping(List<String> events) throws InterruptedException {
      batches.add(List.copyOf(events));
      for (int i = 0; i == 0 || i + 1 < events.size(); i++) {
        List<String> chunk = List.copyOf(events.subList(i, Math.min(i + 2, events.size())));
        if (i == 0 && outageFor.remove(chunk.get(0))) {
          store.down.set(true);
          try {
            notifier.notifyChunk(chunk);
          } catch (RuntimeException failure) {
            caught.add(chunk + ": " + failure.getClass().getSimpleName());
          } finally {
            store.down.set(false);
          }
          continue;
        }
        untilItReturns(() -> notifier.notifyChunk(chunk), chunk);
      }
    }

    /**
     * The whole batch as one chunk, its call retried by the listener over the same events after a
     * failure (bounded) until it returns.
     */
    @KafkaListener(id = PARTIAL_ID, topics = PARTIAL_TOPIC, batch = "true", autoStartup = "false")
    public void partial(List<String> events) throws InterruptedException {
      batches.add(List.copyOf(events));
      List<String> chunk = List.copyOf(events);
      untilItReturns(() -> notifier.notifyPartly(chunk), chunk);
    }

    private static void untilItReturns(Runnable call, List<String> chunk)
        throws InterruptedException {
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (true) {
        try {
          call.run();
          return;
        } catch (RuntimeException failure) {
          caught.add(chunk + ": " + failure.getClass().getSimpleName());
          if (System.nanoTime() > deadline) {
            return;
          }
        }
        Thread.sleep(20);
      }
    }
  }

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ListenerTestConfiguration.class)
  static class App {
    @Bean
    NewTopic probexOverlapTopic() {
      return new NewTopic(OVERLAP_TOPIC, 1, (short) 1);
    }

    @Bean
    NewTopic probexPartialTopic() {
      return new NewTopic(PARTIAL_TOPIC, 1, (short) 1);
    }

    @Bean
    ChunkNotifier probexChunkNotifier() {
      return new ChunkNotifier();
    }

    @Bean
    ChunkingListeners probexChunkingListeners(ChunkNotifier notifier, SwitchableKeyStore store) {
      return new ChunkingListeners(notifier, store);
    }
  }

  @DynamicPropertySource
  static void kafka(DynamicPropertyRegistry registry) {
    EmbeddedKafka.addProperties(registry);
  }

  @Autowired KafkaTemplate<String, String> template;
  @Autowired KafkaListenerEndpointRegistry registry;

  /**
   * A batch [a, b, c] in chunks [a, b] (deferred, caught) and [b, c] (sent): the delivery must come
   * back for a, and each of a, b, c be sent once.
   */
  @Test
  void overlappingChunksTheFirstDeferredSendEachOnce() throws Exception {
    String id = UUID.randomUUID().toString();
    String a = "a-" + id;
    String b = "b-" + id;
    String c = "c-" + id;
    outageFor.add(a);
    for (String event : List.of(a, b, c)) {
      template.send(OVERLAP_TOPIC, event).get(30, TimeUnit.SECONDS);
    }
    registry.getListenerContainer(OVERLAP_ID).start();
    Polling.await("c sent", () -> sends(c) >= 1);
    String marker = "marker-" + id;
    template.send(OVERLAP_TOPIC, marker).get(30, TimeUnit.SECONDS);
    Polling.await("the marker sent", () -> sends(marker) >= 1);

    assertThat(batches.get(0)).as("the first batch (all three)").containsExactly(a, b, c);
    assertThat(List.of(sends(a), sends(b), sends(c)))
        .as("sends of a, b, c (batches: %s; caught: %s)", batches, caught)
        .containsExactly(1L, 1L, 1L);
  }

  /**
   * A batch [e, f, g] as one chunk whose call sends e, then fails at f (named by index), caught,
   * and is retried over the same keys: e must be a replay, f and g sent once.
   */
  @Test
  void aChunkRetriedAfterAPartialSendSendsEachOnce() throws Exception {
    String id = UUID.randomUUID().toString();
    String e = "e-" + id;
    String f = "f-" + id;
    String g = "g-" + id;
    failOnce.add(f);
    for (String event : List.of(e, f, g)) {
      template.send(PARTIAL_TOPIC, event).get(30, TimeUnit.SECONDS);
    }
    registry.getListenerContainer(PARTIAL_ID).start();
    Polling.await("g sent", () -> sends(g) >= 1);
    String marker = "marker-" + id;
    template.send(PARTIAL_TOPIC, marker).get(30, TimeUnit.SECONDS);
    Polling.await("the marker sent", () -> sends(marker) >= 1);

    assertThat(List.of(sends(e), sends(f), sends(g)))
        .as("sends of e, f, g (batches: %s; caught: %s)", batches, caught)
        .containsExactly(1L, 1L, 1L);
  }
}
