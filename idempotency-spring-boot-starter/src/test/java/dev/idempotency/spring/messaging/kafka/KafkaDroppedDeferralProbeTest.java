package dev.idempotency.spring.messaging.kafka;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.EmbeddedKafka;
import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import dev.idempotency.spring.messaging.Polling;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.lang.reflect.Method;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.aopalliance.intercept.MethodInterceptor;
import org.apache.kafka.clients.admin.NewTopic;
import org.junit.jupiter.api.Test;
import org.springframework.aop.support.DefaultPointcutAdvisor;
import org.springframework.aop.support.StaticMethodMatcherPointcut;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.config.BeanDefinition;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.context.annotation.Role;
import org.springframework.core.Ordered;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * fixdefer (SPEC 1, 15), on the shared in-JVM KRaft broker: a guarded Kafka record listener whose
 * bean carries an application's "log and continue" advice, ordered before the guard, that drops
 * what the listener throws. A record delivered while the store is down is deferred by the guard
 * (nothing sent) inside the bean's proxy; the advice drops the deferral and the call returns. Once
 * the store answers the record must run once, never be committed unsent.
 */
@SpringBootTest(
    classes = KafkaDroppedDeferralProbeTest.App.class,
    properties = {
      "spring.kafka.consumer.group-id=idem-dropped-deferral",
      "spring.kafka.consumer.auto-offset-reset=earliest"
    })
@DirtiesContext
class KafkaDroppedDeferralProbeTest {

  static final String TOPIC = "idem.dropped-deferral";
  static final String BATCH_TOPIC = "idem.dropped-batch-deferral";
  static final String TWO_CALLS_TOPIC = "idem.dropped-deferral-two-calls";

  /** Events whose first guarded call, on their first delivery only, finds the store down. */
  static final Set<String> outageFor = ConcurrentHashMap.newKeySet();

  static final List<String> sent = new CopyOnWriteArrayList<>();

  /** What the application's advice dropped. */
  static final List<String> dropped = new CopyOnWriteArrayList<>();

  public static class Listeners {
    /** Keyed by its payload; the application's advice around it drops what it throws. */
    @KafkaListener(id = "kafka-dropped-deferral", topics = TOPIC)
    @IdempotentListener(name = "kafka-dropped-deferral", key = "#event")
    public void dropped(String event) {
      sent.add(event);
    }

    /** A batch listener, keyed by each payload; the application's advice drops what it throws. */
    @KafkaListener(id = "kafka-dropped-batch-deferral", topics = BATCH_TOPIC, batch = "true")
    @IdempotentListener(name = "kafka-dropped-batch-deferral", key = "#payload")
    public void droppedBatch(List<String> events) {
      sent.addAll(events);
    }
  }

  /** The guarded send, one per recipient, keyed by its argument. */
  public static class Notifier {
    @IdempotentListener(name = "kafka-two-calls-notify", key = "#recipientEvent")
    public void notifyRecipient(String recipientEvent) {
      sent.add(recipientEvent);
    }
  }

  /**
   * An unguarded listener that notifies two recipients per record through the guarded {@link
   * Notifier}, catching what each call throws ("log and continue"): the store is down for the first
   * call of an event's first delivery only.
   */
  public static class TwoCalls {
    private final Notifier notifier;
    private final SwitchableKeyStore store;

    TwoCalls(Notifier notifier, SwitchableKeyStore store) {
      this.notifier = notifier;
      this.store = store;
    }

    @KafkaListener(id = "kafka-two-calls", topics = TWO_CALLS_TOPIC)
    public void twoCalls(String event) {
      store.down.set(outageFor.remove(event));
      try {
        notifier.notifyRecipient(event + "/a");
      } catch (RuntimeException failure) {
        dropped.add(failure.getClass().getSimpleName());
      } finally {
        store.down.set(false);
      }
      // right after an outage the guard's breaker refuses calls until its probe found the store
      // answering: the second call is retried (bounded), as the same call, until it returns
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (true) {
        try {
          notifier.notifyRecipient(event + "/b");
          return;
        } catch (RuntimeException failure) {
          dropped.add(failure.getClass().getSimpleName());
          if (System.nanoTime() > deadline) {
            return;
          }
        }
        try {
          Thread.sleep(20);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          return;
        }
      }
    }
  }

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ListenerTestConfiguration.class)
  static class App {
    @Bean
    NewTopic droppedDeferralTopic() {
      return new NewTopic(TOPIC, 1, (short) 1);
    }

    @Bean
    NewTopic droppedBatchDeferralTopic() {
      return new NewTopic(BATCH_TOPIC, 1, (short) 1);
    }

    @Bean
    NewTopic twoCallsTopic() {
      return new NewTopic(TWO_CALLS_TOPIC, 1, (short) 1);
    }

    @Bean
    Notifier kafkaTwoCallsNotifier() {
      return new Notifier();
    }

    @Bean
    TwoCalls kafkaTwoCalls(Notifier notifier, SwitchableKeyStore store) {
      return new TwoCalls(notifier, store);
    }

    @Bean
    Listeners kafkaDroppedDeferralListeners() {
      return new Listeners();
    }

    /** The application's "log and drop" advice on Listeners.dropped, outside the guard. */
    @Bean
    @Role(BeanDefinition.ROLE_INFRASTRUCTURE)
    static DefaultPointcutAdvisor kafkaDroppingAdvisor() {
      DefaultPointcutAdvisor advisor =
          new DefaultPointcutAdvisor(
              new StaticMethodMatcherPointcut() {
                @Override
                public boolean matches(Method method, Class<?> targetClass) {
                  return targetClass == Listeners.class
                      && (method.getName().equals("dropped")
                          || method.getName().equals("droppedBatch"));
                }
              },
              (MethodInterceptor)
                  invocation -> {
                    try {
                      return invocation.proceed();
                    } catch (RuntimeException failure) {
                      dropped.add(failure.getClass().getSimpleName());
                      return null;
                    }
                  });
      advisor.setOrder(Ordered.HIGHEST_PRECEDENCE);
      return advisor;
    }
  }

  @DynamicPropertySource
  static void kafka(DynamicPropertyRegistry registry) {
    EmbeddedKafka.addProperties(registry);
  }

  @Autowired KafkaTemplate<String, String> template;
  @Autowired SwitchableKeyStore store;

  // Fixed by fixdefer2 (was an open finding, severity medium: a lost send, SPEC 1, whenever the
  // store is down or the key in flight, for a guarded Kafka listener whose bean has an application
  // advice ordered before the guard that drops failures, a "log and continue" aspect), fixdefer,
  // Boot 3.5 and 4.0, at cd89fe43 and with the fix for RabbitMQ and JMS: "[sends of the deferred
  // record once the store answers; dropped by the application's advice:
  // [DeferredDeliveryException]] expected: 1L but was: 0L". The guard kept the deferral for the
  // delivery (Delivery.KeptDeferral), but nothing on Kafka acted on it: Spring Kafka has no hook of
  // the container's that runs after a listener returned and can still fail the record (a
  // RecordInterceptor's success() runs after the record was acknowledged, and what it throws is
  // logged and dropped by the container), so the record's offset was committed unsent. Now the
  // container's message listener is wrapped (KafkaKeptDeferrals) and throws the kept deferral to
  // the starter's error handler when the listener returned: the record is sought and retried.
  @Test
  void aDeferralDroppedByTheApplicationsAdviceOnTheListenerIsStillSentOnce() throws Exception {
    assertDeferredThenSentOnce(TOPIC, "dd-");
  }

  /**
   * The batch row: a batch listener's deferral (the store down for its claims), dropped by the
   * application's advice, must not have the batch committed unsent. Failed before fixdefer2 on Boot
   * 3.5 and 4.0 as the record row did (0 sends); now the kept deferral fails the batch after the
   * listener returned, and the container's error handler retries it.
   */
  @Test
  void aBatchDeferralDroppedByTheApplicationsAdviceOnTheListenerIsStillSentOnce() throws Exception {
    assertDeferredThenSentOnce(BATCH_TOPIC, "dd-batch-");
  }

  /**
   * Two guarded calls per record from an unguarded listener (the Kafka row of {@code
   * RabbitTwoGuardedCallsProbeTest}): the first deferred (the store down) and caught, the second
   * sent. The first recipient must still be sent once (the record retried, the second replayed),
   * and the second never twice. Before fixdefer2 it failed on Boot 3.5 and 4.0: "[sends of the
   * first recipient, deferred and caught; caught: [DeferredDeliveryException]] expected: 1L but
   * was: 0L" (nothing on Kafka acted on a kept deferral, and the second call's return erased it).
   */
  @Test
  void aFirstCallsDeferralIsNotErasedByASecondCallThatSent() throws Exception {
    String event = "two-" + UUID.randomUUID();
    int droppedBefore = dropped.size();
    outageFor.add(event);
    template.send(TWO_CALLS_TOPIC, event).get(30, TimeUnit.SECONDS);
    Polling.await("the first call's deferral caught", () -> dropped.size() > droppedBefore);
    Polling.await("the second recipient sent", () -> sent.contains(event + "/b"));
    String marker = "two-marker-" + UUID.randomUUID();
    template.send(TWO_CALLS_TOPIC, marker).get(30, TimeUnit.SECONDS);
    Polling.await("the marker sent", () -> sent.contains(marker + "/b"));

    assertThat(sent.stream().filter((event + "/a")::equals).count())
        .as("sends of the first recipient, deferred and caught; caught: %s", dropped)
        .isEqualTo(1);
    assertThat(sent.stream().filter((event + "/b")::equals).count())
        .as("sends of the second recipient")
        .isEqualTo(1);
  }

  /**
   * Sends a record to {@code topic} while the store is down, until its deferral was dropped (or,
   * the deferral kept, retried and refused again); then, the store up, a marker behind it: the
   * record must have been sent once by the time the marker is.
   */
  private void assertDeferredThenSentOnce(String topic, String prefix) throws Exception {
    String event = prefix + UUID.randomUUID();
    int droppedBefore = dropped.size();
    int refusedBefore = store.refused.get();
    store.down.set(true);
    try {
      template.send(topic, event).get(30, TimeUnit.SECONDS);
      // the deferral dropped by the advice, or (the deferral kept) retried and refused again
      Polling.await(
          "the record's deferral dropped, or 5 claims refused",
          () -> dropped.size() > droppedBefore || store.refused.get() >= refusedBefore + 5);
    } finally {
      store.down.set(false);
    }
    String marker = prefix + "marker-" + UUID.randomUUID();
    template.send(topic, marker).get(30, TimeUnit.SECONDS);
    Polling.await("the marker sent", () -> sent.contains(marker));

    assertThat(sent.stream().filter(event::equals).count())
        .as(
            "sends of the deferred record once the store answers; dropped by the application's"
                + " advice: %s",
            dropped)
        .isEqualTo(1);
  }
}
