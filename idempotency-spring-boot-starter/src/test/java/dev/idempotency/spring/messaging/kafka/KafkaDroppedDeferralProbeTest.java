package dev.idempotency.spring.messaging.kafka;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.EmbeddedKafka;
import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import dev.idempotency.spring.messaging.Polling;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.lang.reflect.Method;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.aopalliance.intercept.MethodInterceptor;
import org.apache.kafka.clients.admin.NewTopic;
import org.junit.jupiter.api.Tag;
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

  @DynamicPropertySource
  static void kafka(DynamicPropertyRegistry registry) {
    EmbeddedKafka.addProperties(registry);
  }

  @Autowired KafkaTemplate<String, String> template;
  @Autowired SwitchableKeyStore store;

  // Open finding (severity medium: a lost send, SPEC 1, whenever the store is down or the key in
  // flight, for a guarded Kafka listener whose bean has an application advice ordered before the
  // guard that drops failures, a "log and continue" aspect), fixdefer, Boot 3.5 and 4.0, at
  // cd89fe43 and with the fix for RabbitMQ and JMS: "[sends of the deferred record once the store
  // answers; dropped by the application's advice: [DeferredDeliveryException]] expected: 1L but
  // was: 0L". The guard keeps the deferral for the delivery (Delivery.KeptDeferral), but nothing
  // on Kafka acts on it: Spring Kafka has no hook of the container's that runs after a listener
  // returned and can still fail the record (a RecordInterceptor's success() runs after the record
  // was acknowledged, and what it throws is logged and dropped by the container), so the record's
  // offset is committed unsent. Acting on the kept deferral needs the container's message listener
  // wrapped (an AbstractDelegatingMessageListenerAdapter, as RecordFilterStrategy's adapter is),
  // throwing the kept deferral to the starter's error handler when the listener returned.
  @Test
  @Tag("open-finding")
  void aDeferralDroppedByTheApplicationsAdviceOnTheListenerIsStillSentOnce() throws Exception {
    String event = "dd-" + UUID.randomUUID();
    int droppedBefore = dropped.size();
    int refusedBefore = store.refused.get();
    store.down.set(true);
    try {
      template.send(TOPIC, event).get(30, TimeUnit.SECONDS);
      // the deferral dropped by the advice, or (the deferral kept) retried and refused again
      Polling.await(
          "the record's deferral dropped, or 5 claims refused",
          () -> dropped.size() > droppedBefore || store.refused.get() >= refusedBefore + 5);
    } finally {
      store.down.set(false);
    }
    String marker = "dd-marker-" + UUID.randomUUID();
    template.send(TOPIC, marker).get(30, TimeUnit.SECONDS);
    Polling.await("the marker sent", () -> sent.contains(marker));

    assertThat(sent.stream().filter(event::equals).count())
        .as(
            "sends of the deferred record once the store answers; dropped by the application's"
                + " advice: %s",
            dropped)
        .isEqualTo(1);
  }
}
