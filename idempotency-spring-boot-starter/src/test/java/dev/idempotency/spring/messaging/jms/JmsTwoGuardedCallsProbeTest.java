package dev.idempotency.spring.messaging.jms;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import dev.idempotency.spring.messaging.Polling;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
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
 * SPEC 1, 15, on a real embedded ActiveMQ Artemis (Spring Boot's defaults: transacted sessions):
 * the JMS row of {@code RabbitTwoGuardedCallsProbeTest}. An unguarded {@code @JmsListener} calls an
 * {@code IdempotentListener} method of another bean once per recipient ("notify each recipient, log
 * and continue"), catching what each call throws. The store is down for one of the two calls of the
 * first delivery only: that call is deferred (nothing sent) and caught, the other sends. The
 * deferred recipient must be sent once (the starter's JMS listener sends the message again later,
 * where the other recipient is a replay), and no recipient twice.
 *
 * <p>Before fixdefer2 the first row failed on Boot 3.5 and 4.0: "[sends of the first recipient,
 * deferred and caught; caught by the listener: [DeferredDeliveryException, ..]] expected: 1L but
 * was: 0L" (the second call's return erased the first call's kept deferral, and the message was
 * committed with the first recipient unsent); the reverse row passed. Fixed by keeping a deferral
 * per call (operation and key).
 */
@SpringBootTest(
    classes = JmsTwoGuardedCallsProbeTest.App.class,
    properties = {
      "spring.artemis.mode=embedded",
      "spring.artemis.embedded.enabled=true",
      "spring.artemis.embedded.queues="
          + JmsTwoGuardedCallsProbeTest.FIRST_DEFERRED_QUEUE
          + ","
          + JmsTwoGuardedCallsProbeTest.SECOND_DEFERRED_QUEUE,
      "idempotency.in-flight-wait=50ms",
      "idempotency.messaging.back-off.initial=50ms",
      "idempotency.messaging.back-off.max=300ms",
      "spring.main.banner-mode=off",
      "logging.level.org.springframework.jms.listener=OFF"
    })
@DirtiesContext
class JmsTwoGuardedCallsProbeTest {

  static final String FIRST_DEFERRED_QUEUE = "idem.two-calls.first-deferred";
  static final String SECOND_DEFERRED_QUEUE = "idem.two-calls.second-deferred";

  /** How long a deferred recipient may take to be sent once the store answers. */
  static final Duration SENT_WITHIN = Duration.ofSeconds(20);

  static final List<String> sent = new CopyOnWriteArrayList<>();

  /** What the listener caught from the guarded calls (their simple class names). */
  static final List<String> caught = new CopyOnWriteArrayList<>();

  /** Events whose deferred call, on their first delivery only, finds the store down. */
  static final Set<String> outageFor = ConcurrentHashMap.newKeySet();

  /** The guarded send, one per recipient, keyed by its argument. */
  public static class Notifier {
    @IdempotentListener(name = "jms-two-calls-notify", key = "#recipientEvent")
    public void notifyRecipient(String recipientEvent) {
      sent.add(recipientEvent);
    }
  }

  /** The application's listeners: notify each recipient, log and continue. */
  public static class Listeners {
    private final Notifier notifier;
    private final SwitchableKeyStore store;

    Listeners(Notifier notifier, SwitchableKeyStore store) {
      this.notifier = notifier;
      this.store = store;
    }

    /** The store down for the first call (deferred), up for the second (sent). */
    @JmsListener(id = "jms-two-calls-first-deferred", destination = FIRST_DEFERRED_QUEUE)
    public void firstDeferred(String event) {
      notifyOne(event + "/a", outageFor.remove(event));
      notifyUntilSent(event + "/b");
    }

    /** The store up for the first call (sent), down for the second (deferred). */
    @JmsListener(id = "jms-two-calls-second-deferred", destination = SECOND_DEFERRED_QUEUE)
    public void secondDeferred(String event) {
      boolean outage = outageFor.remove(event);
      notifyUntilSent(event + "/a");
      notifyOne(event + "/b", outage);
    }

    /**
     * Calls until the call returns (bounded: {@link #SENT_WITHIN}): right after an outage the
     * guard's breaker refuses calls until its probe found the store answering, so a call made at
     * once may be deferred too; retried, the same call (operation and key) then sends or replays.
     */
    private void notifyUntilSent(String recipientEvent) {
      long deadline = System.nanoTime() + SENT_WITHIN.toNanos();
      while (true) {
        try {
          notifier.notifyRecipient(recipientEvent);
          return;
        } catch (RuntimeException failure) {
          caught.add(failure.getClass().getSimpleName());
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

    private void notifyOne(String recipientEvent, boolean down) {
      store.down.set(down);
      try {
        notifier.notifyRecipient(recipientEvent);
      } catch (RuntimeException failure) {
        caught.add(failure.getClass().getSimpleName());
      } finally {
        store.down.set(false);
      }
    }
  }

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ListenerTestConfiguration.class)
  static class App {
    @Bean
    Notifier jmsTwoCallsNotifier() {
      return new Notifier();
    }

    @Bean
    Listeners jmsTwoCallsListeners(Notifier notifier, SwitchableKeyStore store) {
      return new Listeners(notifier, store);
    }
  }

  @Autowired JmsTemplate template;

  /**
   * The first call deferred and caught, the second sent: the second call's return must not erase
   * the first call's deferral kept for the delivery.
   */
  @Test
  void aFirstCallsDeferralIsNotErasedByASecondCallThatSent() throws Exception {
    String event = "first-" + UUID.randomUUID();
    int caughtBefore = caught.size();
    outageFor.add(event);
    template.convertAndSend(FIRST_DEFERRED_QUEUE, event);
    Polling.await("the first call's deferral caught", () -> caught.size() > caughtBefore);
    Polling.await("the second recipient sent", () -> sent.contains(event + "/b"));
    awaitSentOrGiveUp(FIRST_DEFERRED_QUEUE, event + "/a");

    assertThat(count(event + "/a"))
        .as("sends of the first recipient, deferred and caught; caught by the listener: %s", caught)
        .isEqualTo(1);
    assertThat(count(event + "/b")).as("sends of the second recipient").isEqualTo(1);
  }

  /**
   * The first call sent, the second deferred and caught: the message is sent again for the second,
   * and there the first is a replay, never a second send.
   */
  @Test
  void aSecondCallsDeferralSendsAgainWithoutASecondSendOfTheFirst() throws Exception {
    String event = "second-" + UUID.randomUUID();
    int caughtBefore = caught.size();
    outageFor.add(event);
    template.convertAndSend(SECOND_DEFERRED_QUEUE, event);
    Polling.await("the second call's deferral caught", () -> caught.size() > caughtBefore);
    awaitSentOrGiveUp(SECOND_DEFERRED_QUEUE, event + "/b");

    assertThat(count(event + "/a")).as("sends of the first recipient, sent at once").isEqualTo(1);
    assertThat(count(event + "/b"))
        .as("sends of the second recipient, deferred and caught; caught: %s", caught)
        .isEqualTo(1);
  }

  /**
   * Waits (bounded: {@link #SENT_WITHIN}, many times the backoff of 50 to 300 ms) until {@code
   * recipient} is sent; then sends a marker to {@code queue} and waits until both its recipients
   * are sent, so that the queue's earlier deliveries (a copy sent again included) are over.
   */
  private void awaitSentOrGiveUp(String queue, String recipient) throws InterruptedException {
    long deadline = System.nanoTime() + SENT_WITHIN.toNanos();
    while (!sent.contains(recipient) && System.nanoTime() < deadline) {
      Thread.sleep(20);
    }
    String marker = "marker-" + UUID.randomUUID();
    template.convertAndSend(queue, marker);
    Polling.await("the marker sent", () -> sent.contains(marker + "/b"));
  }

  private static long count(String recipient) {
    return sent.stream().filter(recipient::equals).count();
  }
}
