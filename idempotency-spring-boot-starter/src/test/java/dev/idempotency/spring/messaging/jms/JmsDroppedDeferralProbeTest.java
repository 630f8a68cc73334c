package dev.idempotency.spring.messaging.jms;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import dev.idempotency.spring.messaging.Polling;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import org.aopalliance.intercept.MethodInterceptor;
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
import org.springframework.jms.annotation.JmsListener;
import org.springframework.jms.core.JmsTemplate;
import org.springframework.test.annotation.DirtiesContext;

/**
 * fixdefer (SPEC 1, 15), on a real embedded ActiveMQ Artemis (Spring Boot's defaults: transacted
 * sessions): a guarded {@code @JmsListener} whose bean carries an application's "log and continue"
 * advice, ordered before the guard, that drops what the listener throws. A message delivered while
 * the store is down is deferred by the guard (nothing sent) inside the bean's proxy; the advice
 * drops the deferral and the call returns. Once the store answers the message must run once, never
 * be acknowledged unsent: the starter's JMS listener sends it again later, as for a deferral that
 * reached it.
 */
@SpringBootTest(
    classes = JmsDroppedDeferralProbeTest.App.class,
    properties = {
      "spring.artemis.mode=embedded",
      "spring.artemis.embedded.enabled=true",
      "spring.artemis.embedded.queues=" + JmsDroppedDeferralProbeTest.QUEUE,
      "idempotency.in-flight-wait=50ms",
      "idempotency.messaging.back-off.initial=50ms",
      "idempotency.messaging.back-off.max=300ms",
      "spring.main.banner-mode=off",
      "logging.level.org.springframework.jms.listener=OFF"
    })
@DirtiesContext
class JmsDroppedDeferralProbeTest {

  static final String QUEUE = "idem.fixdefer.dropped";

  /** How long a deferred message may take to be sent once the store answers. */
  static final Duration SENT_WITHIN = Duration.ofSeconds(20);

  static final List<String> sent = new CopyOnWriteArrayList<>();

  /** What the application's advice dropped. */
  static final List<String> dropped = new CopyOnWriteArrayList<>();

  public static class Listeners {
    /** Keyed by its payload; the application's advice around it drops what it throws. */
    @JmsListener(id = "jms-dropped-deferral", destination = QUEUE)
    @IdempotentListener(name = "jms-dropped-deferral", key = "#event")
    public void dropped(String event) {
      sent.add(event);
    }
  }

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ListenerTestConfiguration.class)
  static class App {
    @Bean
    Listeners jmsDroppedDeferralListeners() {
      return new Listeners();
    }

    /** The application's "log and drop" advice on Listeners.dropped, outside the guard. */
    @Bean
    @Role(BeanDefinition.ROLE_INFRASTRUCTURE)
    static DefaultPointcutAdvisor jmsDroppingAdvisor() {
      DefaultPointcutAdvisor advisor =
          new DefaultPointcutAdvisor(
              new StaticMethodMatcherPointcut() {
                @Override
                public boolean matches(Method method, Class<?> targetClass) {
                  return targetClass == Listeners.class && method.getName().equals("dropped");
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

  @Autowired JmsTemplate template;
  @Autowired SwitchableKeyStore store;

  @Test
  void aDeferralDroppedByTheApplicationsAdviceOnTheListenerIsStillSentOnce() throws Exception {
    String event = "dd-" + UUID.randomUUID();
    int droppedBefore = dropped.size();
    store.down.set(true);
    try {
      template.convertAndSend(QUEUE, event);
      Polling.await("the delivery's deferral dropped", () -> dropped.size() > droppedBefore);
    } finally {
      store.down.set(false);
    }
    // kept, the deferral sends the message again after a pause of 50 to 300 ms: sent well within
    // the wait; lost, it is never sent
    long deadline = System.nanoTime() + SENT_WITHIN.toNanos();
    while (!sent.contains(event) && System.nanoTime() < deadline) {
      Thread.sleep(20);
    }
    String marker = "dd-marker-" + UUID.randomUUID();
    template.convertAndSend(QUEUE, marker);
    Polling.await("a later message sent", () -> sent.contains(marker));

    assertThat(sent.stream().filter(event::equals).count())
        .as(
            "sends of the deferred message within %s of the store answering; dropped by the"
                + " application's advice: %s",
            SENT_WITHIN, dropped)
        .isEqualTo(1);
  }
}
