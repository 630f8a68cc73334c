package dev.idempotency.spring.messaging.rabbit;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.core.Declarables;
import org.springframework.amqp.rabbit.annotation.RabbitListener;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.test.annotation.DirtiesContext;

/**
 * probeQ, on a real RabbitMQ broker: attempts to break SPEC 1 on fixdefer (56f70dfe), which keeps
 * the guard's deferral for the delivery ({@code Delivery.KeptDeferral}) so that RabbitMQ's
 * container advice requeues a delivery whose deferral the application dropped, and forgets it when
 * a later guarded call for the delivery returns.
 *
 * <p>The set-up: an unguarded {@code @RabbitListener} that, per message, calls an {@code
 * IdempotentListener} method of another bean once per recipient ("notify each recipient, log and
 * continue"), catching what each call throws, as the application's "log and continue" advice of
 * {@code RabbitFixrabbitProbeTest} does. The store is down for the first call only of the first
 * delivery (an outage that ends between the two calls; a key in flight elsewhere defers the same
 * way): the first call is deferred (nothing sent), the second sends.
 */
@SpringBootTest(
    classes = RabbitTwoGuardedCallsProbeTest.App.class,
    properties = "logging.level.org.springframework.amqp.rabbit.listener=OFF")
@DirtiesContext
class RabbitTwoGuardedCallsProbeTest extends RabbitProbeSupport {

  static final String ONE_CALL_QUEUE = "idem.two-calls-probe.one";
  static final String TWO_CALLS_QUEUE = "idem.two-calls-probe.two";
  static final String SECOND_DEFERRED_QUEUE = "idem.two-calls-probe.second-deferred";

  static final List<String> sent = new CopyOnWriteArrayList<>();

  /** What the listener caught from the guarded calls (their simple class names). */
  static final List<String> caught = new CopyOnWriteArrayList<>();

  /** Events whose first guarded call, on their first delivery only, finds the store down. */
  static final Set<String> outageFor = ConcurrentHashMap.newKeySet();

  @Autowired SwitchableKeyStore store;

  /** The guarded send, one per recipient, keyed by its argument. */
  public static class Notifier {
    @IdempotentListener(name = "two-calls-probe-notify", key = "#recipientEvent")
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

    @RabbitListener(id = "two-calls-probe-one", queues = ONE_CALL_QUEUE)
    public void one(String event) {
      boolean outage = outageFor.remove(event);
      store.down.set(outage);
      try {
        notifier.notifyRecipient(event + "/a");
      } catch (RuntimeException failure) {
        caught.add(failure.getClass().getSimpleName());
      } finally {
        store.down.set(false);
      }
    }

    @RabbitListener(id = "two-calls-probe-two", queues = TWO_CALLS_QUEUE)
    public void two(String event) {
      boolean outage = outageFor.remove(event);
      store.down.set(outage);
      try {
        notifier.notifyRecipient(event + "/a");
      } catch (RuntimeException failure) {
        caught.add(failure.getClass().getSimpleName());
      } finally {
        store.down.set(false);
      }
      notifyUntilSent(event + "/b");
    }

    /**
     * Calls until the call returns (bounded: 30 s): right after an outage the guard's breaker
     * refuses calls until its probe found the store answering, so a call made at once may be
     * deferred too (then the row would not show a second call that sent); retried, the same call
     * (operation and key) then sends or replays.
     */
    private void notifyUntilSent(String recipientEvent) {
      long deadline = System.nanoTime() + 30_000_000_000L;
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

    /** As {@link #two}, the outage on the second call instead (the first sends). */
    @RabbitListener(id = "two-calls-probe-second-deferred", queues = SECOND_DEFERRED_QUEUE)
    public void secondDeferred(String event) {
      boolean outage = outageFor.remove(event);
      notifyUntilSent(event + "/a");
      store.down.set(outage);
      try {
        notifier.notifyRecipient(event + "/b");
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
    Notifier twoCallsProbeNotifier() {
      return new Notifier();
    }

    @Bean
    Listeners twoCallsProbeListeners(Notifier notifier, SwitchableKeyStore store) {
      return new Listeners(notifier, store);
    }

    @Bean
    Declarables twoCallsProbeQueues() {
      return deadLetteredQueues(ONE_CALL_QUEUE, TWO_CALLS_QUEUE, SECOND_DEFERRED_QUEUE);
    }
  }

  @Override
  List<String> sends() {
    return sent;
  }

  /**
   * The control: one guarded call per delivery, deferred (the store down) and caught by the
   * listener. The guard kept the deferral for the delivery, so the delivery is requeued and sent
   * once on its redelivery.
   */
  @Test
  void aDeferralTheListenerCaughtIsStillSentOnce() throws Exception {
    String event = unique("one");
    int caughtBefore = caught.size();
    outageFor.add(event);
    plain.send("", ONE_CALL_QUEUE, withoutKey(event));
    await("the deferral caught", () -> caught.size() > caughtBefore);
    awaitSentOrGiveUp(ONE_CALL_QUEUE, event + "/a");

    assertThat(sent(event + "/a"))
        .as("sends of the deferred recipient; caught by the listener: %s", caught)
        .isEqualTo(1);
  }

  /**
   * Two guarded calls per delivery: the first deferred (the store down) and caught, the second
   * sent. The first recipient must still be sent once (the delivery requeued, the second replayed
   * on the redelivery), and the second never twice.
   */
  // Fixed by fixdefer2 (was an open finding, severity medium: a lost send, SPEC 1), probeQ, Boot
  // 3.5 and 4.0 at 7efd6b9a (fixdefer merged): "[sends of the first recipient, deferred and caught;
  // caught by the listener: [DeferredDeliveryException, ..]] expected: 1 but was: 0" after 30 s and
  // a marker behind it (the second recipient sent once); the one-call control row passed on both
  // lines. IdempotentListenerInterceptor cleared the delivery's KeptDeferral when a later guarded
  // call for the delivery returned (meant for a retry of the same call): a call for another key
  // returning erased the first key's deferral, RabbitDeliveryAdvice found nothing kept, and the
  // container acknowledged the delivery with the first recipient unsent. Only where an
  // IdempotentListener method is called more than once per delivery (here: from an unguarded
  // listener) and the caller drops a deferral. Now a deferral is kept per call (operation and key)
  // and forgotten only when the same call returns or fails otherwise.
  @Test
  void aFirstCallsDeferralIsNotErasedByASecondCallThatSent() throws Exception {
    String event = unique("two");
    int caughtBefore = caught.size();
    outageFor.add(event);
    plain.send("", TWO_CALLS_QUEUE, withoutKey(event));
    await("the first call's deferral caught", () -> caught.size() > caughtBefore);
    await("the second recipient sent", () -> sent(event + "/b") >= 1);
    awaitSentOrGiveUp(TWO_CALLS_QUEUE, event + "/a");

    assertThat(sent(event + "/a"))
        .as("sends of the first recipient, deferred and caught; caught by the listener: %s", caught)
        .isEqualTo(1);
    assertThat(sent(event + "/b")).as("sends of the second recipient").isEqualTo(1);
  }

  /**
   * Two guarded calls per delivery, the first sent and the second deferred (the store down) and
   * caught: the delivery is requeued for the second, and on the redelivery the first must be a
   * replay, never a second send.
   */
  @Test
  void aSecondCallsDeferralRequeuesWithoutASecondSendOfTheFirst() throws Exception {
    String event = unique("second");
    int caughtBefore = caught.size();
    outageFor.add(event);
    plain.send("", SECOND_DEFERRED_QUEUE, withoutKey(event));
    await("the second call's deferral caught", () -> caught.size() > caughtBefore);
    awaitSentOrGiveUp(SECOND_DEFERRED_QUEUE, event + "/b");

    assertThat(sent(event + "/a")).as("sends of the first recipient, sent at once").isEqualTo(1);
    assertThat(sent(event + "/b"))
        .as("sends of the second recipient, deferred and caught; caught: %s", caught)
        .isEqualTo(1);
  }

  /**
   * Waits (bounded: 30 s, which is many times the messaging backoff of a requeue) until {@code
   * recipient} is sent; then publishes a marker to {@code queue} and waits until it is sent, so
   * that the queue's earlier deliveries (a requeue included) are over.
   */
  private void awaitSentOrGiveUp(String queue, String recipient) throws InterruptedException {
    long deadline = System.nanoTime() + 30_000_000_000L;
    while (sent(recipient) < 1 && System.nanoTime() < deadline) {
      Thread.sleep(20);
    }
    String marker = unique("marker");
    plain.send("", queue, withoutKey(marker));
    await("the marker sent", () -> sent(marker + "/a") >= 1);
  }
}
