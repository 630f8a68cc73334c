package dev.idempotency.spring.messaging.rabbit;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.Idempotent;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.aopalliance.intercept.MethodInterceptor;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.core.Declarables;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.rabbit.annotation.RabbitListener;
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
import org.springframework.test.annotation.DirtiesContext;

/**
 * probeS, on a real RabbitMQ broker: fixdefer keeps a deferral the {@code @IdempotentListener}
 * guard throws for its delivery, so that an application advice on the listener bean that drops
 * failures (ordered before the guard) cannot have the container acknowledge the message unsent. The
 * {@code @Idempotent} interceptor kept nothing for the delivery (fixidem has it keep its deferral
 * too). Two rows, the store down (nothing sent), the application's "log and drop" advice on the
 * listener bean:
 *
 * <ul>
 *   <li>{@code @Idempotent} on the {@code @RabbitListener} method itself (a guarded listener, as
 *       docs/message-consumers.md counts it);
 *   <li>a plain {@code @RabbitListener} calling another bean's {@code @Idempotent} method (not a
 *       listener method: its store failure reaches the listener as any exception of the service).
 * </ul>
 *
 * Each message must be sent once after the store answers again, never acknowledged unsent.
 */
@SpringBootTest(
    classes = RabbitIdempotentMethodDroppedDeferralProbeTest.App.class,
    properties = "logging.level.org.springframework.amqp.rabbit.listener=OFF")
@DirtiesContext
class RabbitIdempotentMethodDroppedDeferralProbeTest extends RabbitProbeSupport {

  static final String METHOD_QUEUE = "idem.probes-dropped.idempotent-method";
  static final String SERVICE_QUEUE = "idem.probes-dropped.idempotent-service";

  /** How long a deferred message may take to be sent once the store answers. */
  static final Duration SENT_WITHIN = Duration.ofSeconds(20);

  static final List<String> sent = new CopyOnWriteArrayList<>();

  /** What the application's advice on the listener bean dropped. */
  static final List<String> dropped = new CopyOnWriteArrayList<>();

  @Autowired SwitchableKeyStore store;

  /** The service that makes the provider call, guarded by {@code @Idempotent}. */
  public static class Notifier {
    @Idempotent(name = "probes-dropped-notifier", key = "#event")
    public void send(String event) {
      sent.add(event);
    }
  }

  public static class Listeners {
    private final Notifier notifier;

    Listeners(Notifier notifier) {
      this.notifier = notifier;
    }

    /** {@code @Idempotent} on the listener method itself, keyed by its payload. */
    @RabbitListener(id = "probes-dropped-method", queues = METHOD_QUEUE)
    @Idempotent(name = "probes-dropped-method", key = "#event")
    public void droppedMethod(String event) {
      sent.add(event);
    }

    /** An unguarded listener that calls the guarded service. */
    @RabbitListener(id = "probes-dropped-service", queues = SERVICE_QUEUE)
    public void droppedService(String event) {
      notifier.send(event);
    }
  }

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ListenerTestConfiguration.class)
  static class App {
    @Bean
    Notifier probesDroppedNotifier() {
      return new Notifier();
    }

    @Bean
    Listeners probesDroppedListeners(Notifier notifier) {
      return new Listeners(notifier);
    }

    @Bean
    Declarables probesDroppedQueues() {
      return deadLetteredQueues(METHOD_QUEUE, SERVICE_QUEUE);
    }

    /** The application's "log and drop" advice on the listener bean, before the guard. */
    @Bean
    @Role(BeanDefinition.ROLE_INFRASTRUCTURE)
    static DefaultPointcutAdvisor probesDroppingAdvisor() {
      DefaultPointcutAdvisor advisor =
          new DefaultPointcutAdvisor(
              new StaticMethodMatcherPointcut() {
                @Override
                public boolean matches(Method method, Class<?> targetClass) {
                  return targetClass == Listeners.class && method.getName().startsWith("dropped");
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

  @Override
  List<String> sends() {
    return sent;
  }

  /**
   * {@code @Idempotent} on the {@code @RabbitListener} method, the store down: the guard's failure
   * dropped by the application's advice; the message must be sent once the store answers.
   */
  // Fixed by fixidem (the @Idempotent interceptor keeps its deferral for the delivery, per call:
  // DeliveryDeferrals); was an open finding (probeS, Boot 3.5 and 4.0 at 76f2b4f3, and seen again
  // at 4b200c07; severity medium: a lost send, SPEC 1, whenever the store is down or the key in
  // flight, for an @Idempotent listener method whose bean has an application advice ordered before
  // the guard that drops failures, the case fixdefer fixed for @IdempotentListener). Expected: the
  // message sent once after the store answers. Happened: "[sends of the message delivered while the
  // store was down, once it answers; dropped by the application's advice: [KeyStoreException],
  // dead-lettered: []] expected: 1 but was: 0". The @Idempotent interceptor keeps nothing for the
  // delivery (Delivery.KeptDeferral is kept by IdempotentListenerInterceptor only), so
  // RabbitDeliveryAdvice finds the call returned with no deferral kept and the container
  // acknowledges the message, never sent.
  @Test
  void anIdempotentListenerMethodsDroppedDeferralIsStillSentOnce() throws Exception {
    assertSentOnceAfterADroppedDeferral(METHOD_QUEUE, "im");
  }

  /**
   * A plain {@code @RabbitListener} calling an {@code @Idempotent} service, the store down: the
   * service's failure dropped by the application's advice on the listener bean; the message must be
   * sent once the store answers.
   */
  // Fixed by fixidem (the @Idempotent interceptor keeps its deferral for the delivery, per call:
  // DeliveryDeferrals); was an open finding (probeS, Boot 3.5 and 4.0 at 76f2b4f3, and seen again
  // at 4b200c07; severity medium to low: a lost send, SPEC 1, whenever the store is down or the key
  // in flight, for an @Idempotent service method called from a plain listener whose bean has an
  // application advice that drops failures; the docs (docs/message-consumers.md, "An advice of
  // yours that drops the guard's exceptions") speak of the guard inside the listener bean's proxy
  // and leave "everything else" to the application, and do not say which way a service's deferral
  // falls). Expected: the message sent once after the store answers. Happened: "[sends of the
  // message delivered while the store was down, once it answers; dropped by the application's
  // advice: [KeyStoreException, KeyStoreException], dead-lettered: []] expected: 1 but was: 0" (the
  // first KeyStoreException is the other row's). The service's KeyStoreException reaches the
  // listener bean's advice, which drops it; nothing kept it for the delivery, and the container
  // acknowledges the message, never sent.
  @Test
  void anIdempotentServiceCalledFromAListenerIsStillSentOnceAfterADroppedDeferral()
      throws Exception {
    assertSentOnceAfterADroppedDeferral(SERVICE_QUEUE, "is");
  }

  private void assertSentOnceAfterADroppedDeferral(String queue, String prefix) throws Exception {
    String event = unique(prefix);
    int droppedBefore = dropped.size();
    int refusedBefore = store.refused.get();
    store.down.set(true);
    try {
      plain.send("", queue, withoutKey(event));
      // the failure dropped by the advice, or (kept and requeued) refused again and again
      await(
          "the delivery's failure dropped, or 5 claims refused",
          () -> dropped.size() > droppedBefore || store.refused.get() >= refusedBefore + 5);
    } finally {
      store.down.set(false);
    }
    String marker = unique(prefix + "-marker");
    plain.send("", queue, withoutKey(marker));
    await("the marker sent", () -> sent(marker) >= 1);
    // kept, the deferral requeues the message after the messaging backoff's pause, possibly behind
    // the marker: sent well within the wait; lost, it is never sent
    long deadline = System.nanoTime() + SENT_WITHIN.toNanos();
    while (sent(event) < 1 && System.nanoTime() < deadline) {
      Thread.sleep(20);
    }
    List<String> deadLettered = drainDeadLetters(queue);

    assertThat(sent(event))
        .as(
            "sends of the message delivered while the store was down, once it answers; dropped by"
                + " the application's advice: %s, dead-lettered: %s",
            dropped, deadLettered)
        .isEqualTo(1);
  }

  /** The bodies in the dead-letter queue of {@code queue} (each waited for up to a second). */
  private List<String> drainDeadLetters(String queue) {
    List<String> bodies = new ArrayList<>();
    for (Message dead = plain.receive(queue + DEAD_LETTERS, 1_000);
        dead != null;
        dead = plain.receive(queue + DEAD_LETTERS, 1_000)) {
      bodies.add(new String(dead.getBody(), StandardCharsets.ISO_8859_1));
    }
    return bodies;
  }
}
