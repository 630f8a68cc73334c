package dev.idempotency.spring.messaging.jms;

import static dev.idempotency.spring.messaging.KeptDeferralProbes.awaitAtMost;
import static dev.idempotency.spring.messaging.KeptDeferralProbes.count;
import static dev.idempotency.spring.messaging.KeptDeferralProbes.unique;
import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.Idempotent;
import dev.idempotency.spring.messaging.KeptDeferralProbes;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import dev.idempotency.spring.messaging.Polling;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.jms.annotation.JmsListener;
import org.springframework.jms.core.JmsTemplate;
import org.springframework.test.annotation.DirtiesContext;

/**
 * probeU, on a real embedded ActiveMQ Artemis (Spring Boot's defaults: transacted sessions):
 * attacks on the kept deferrals of fixdefer2 (13f45a0b) and fixidem (5db6f95f: {@code
 * DeliveryDeferrals}), the JMS rows of {@code KafkaKeptDeferralAttacksProbeTest}. An unguarded
 * {@code @JmsListener} calls an {@code @Idempotent} notifier and catches what it throws while the
 * store is down: nothing is sent, and the starter promises (docs/message-consumers.md,
 * "{@code @Idempotent} too") that the message comes back (a copy sent again later) and is sent once
 * the store answers, never committed unsent (SPEC 1, 15).
 */
@SpringBootTest(
    classes = JmsKeptDeferralAttacksProbeTest.App.class,
    properties = {
      "spring.artemis.mode=embedded",
      "spring.artemis.embedded.enabled=true",
      "spring.artemis.embedded.queues="
          + JmsKeptDeferralAttacksProbeTest.LOOP_QUEUE
          + ","
          + JmsKeptDeferralAttacksProbeTest.EXECUTOR_QUEUE,
      "idempotency.in-flight-wait=50ms",
      "idempotency.messaging.back-off.initial=50ms",
      "idempotency.messaging.back-off.max=300ms",
      "spring.main.banner-mode=off",
      "logging.level.org.springframework.jms.listener=OFF"
    })
@DirtiesContext
class JmsKeptDeferralAttacksProbeTest {

  static final String LOOP_QUEUE = "idem.probeu.jms-loop";
  static final String EXECUTOR_QUEUE = "idem.probeu.jms-executor";

  static final List<String> sent = new CopyOnWriteArrayList<>();

  /** How often each event reached its listener. */
  static final Map<String, AtomicInteger> deliveries = new ConcurrentHashMap<>();

  /** How often a guarded call for each event failed and the listener caught it. */
  static final Map<String, AtomicInteger> caught = new ConcurrentHashMap<>();

  @Autowired SwitchableKeyStore store;
  @Autowired JmsTemplate template;

  /** The provider call, guarded by {@code @Idempotent}, keyed by the event. */
  public static class Notifier {
    @Idempotent(name = "probeu-jms-notify", key = "#event")
    public void send(String event) {
      sent.add(event);
    }
  }

  /** The application's listeners, none guarded itself: each calls the notifier. */
  public static class Listeners {
    private final Notifier notifier;
    private final SwitchableKeyStore store;
    private final ExecutorService pool;

    Listeners(Notifier notifier, SwitchableKeyStore store, ExecutorService pool) {
      this.notifier = notifier;
      this.store = store;
      this.pool = pool;
    }

    /**
     * Retries the deferred call itself until it returns (bounded: 60 s): the store is down for the
     * first call of the first delivery only.
     */
    @JmsListener(id = "probeu-jms-loop", destination = LOOP_QUEUE)
    public void loop(String event) throws InterruptedException {
      KeptDeferralProbes.retryingTheCall(event, store, deliveries, caught, notifier::send);
    }

    /** The call made on another thread (an executor the listener waits for), caught. */
    @JmsListener(id = "probeu-jms-executor", destination = EXECUTOR_QUEUE)
    public void executor(String event) {
      KeptDeferralProbes.callingOnAnotherThread(event, pool, deliveries, caught, notifier::send);
    }
  }

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ListenerTestConfiguration.class)
  static class App {
    @Bean
    Notifier probeuJmsNotifier() {
      return new Notifier();
    }

    @Bean(destroyMethod = "shutdownNow")
    ExecutorService probeuJmsPool() {
      return Executors.newFixedThreadPool(2);
    }

    @Bean
    Listeners probeuJmsListeners(
        Notifier notifier, SwitchableKeyStore store, ExecutorService pool) {
      return new Listeners(notifier, store, pool);
    }
  }

  static int sent(String event) {
    return (int) sent.stream().filter(event::equals).count();
  }

  static void await(String what, BooleanSupplier condition) throws InterruptedException {
    Polling.await(what, condition);
  }

  /**
   * The listener retries the deferred call itself until it returns: the deferral kept for the call
   * is forgotten when the same call returns, so the message is sent once and committed, not sent
   * again.
   */
  @Test
  void aListenerRetryingTheDeferredCallItselfSendsOnceAndIsNotSentAgain() throws Exception {
    String event = unique("loop");
    template.convertAndSend(LOOP_QUEUE, event);
    await("the event sent", () -> sent(event) >= 1);
    String marker = unique("loop-marker");
    template.convertAndSend(LOOP_QUEUE, marker);
    await("the marker sent", () -> sent(marker) >= 1);

    assertThat(count(caught, event)).as("calls of the event deferred and caught").isPositive();
    assertThat(sent(event)).as("sends of the event").isEqualTo(1);
    assertThat(count(deliveries, event))
        .as("deliveries of the event (its call returned on the first)")
        .isEqualTo(1);
  }

  /**
   * The notifier called on another thread (an executor), the listener waiting for it and catching
   * its deferral: the delivery bound to the consumer thread does not see the call.
   */
  // Open finding (probeU, Boot 3.5 and 4.0 at 98c59631; severity medium to low: a lost send, SPEC
  // 1, where a JMS listener makes its guarded call on another thread, waits for it and catches
  // what it throws). Expected: the message sent once after the store answers
  // (docs/message-consumers.md, "@Idempotent too": a deferral your listener catches still brings
  // the message back). Happened: "[sends of the event whose deferral the listener caught from
  // another thread; deliveries:
  // 1, caught: 1] expected: 1 but was: 0": the message committed unsent after one delivery. The
  // delivery is bound to the consumer thread only (Delivery's ThreadLocal): on the executor's
  // thread DeliveryDeferrals finds no delivery and keeps nothing, so the broker's hook finds no
  // kept deferral when the listener returns.
  @Tag("open-finding")
  @Test
  void aDeferralCaughtFromACallOnAnotherThreadIsStillSentOnce() throws Exception {
    String event = unique("executor");
    store.down.set(true);
    try {
      template.convertAndSend(EXECUTOR_QUEUE, event);
      await("the event's deferral caught", () -> count(caught, event) >= 1);
      // a copy sent again while the store is still down, if any comes: the verdict is the send
      // count
      awaitAtMost(15, () -> count(caught, event) >= 2);
    } finally {
      store.down.set(false);
    }
    String marker = unique("executor-marker");
    template.convertAndSend(EXECUTOR_QUEUE, marker);
    await("the marker sent", () -> sent(marker) >= 1);

    assertThat(sent(event))
        .as(
            "sends of the event whose deferral the listener caught from another thread;"
                + " deliveries: %s, caught: %s",
            count(deliveries, event), count(caught, event))
        .isEqualTo(1);
  }
}
