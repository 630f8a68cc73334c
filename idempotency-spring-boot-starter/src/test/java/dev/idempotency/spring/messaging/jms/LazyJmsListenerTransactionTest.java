package dev.idempotency.spring.messaging.jms;

import static dev.idempotency.spring.messaging.Polling.await;
import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.spring.Idempotent;
import dev.idempotency.spring.messaging.Events;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import jakarta.jms.JMSException;
import jakarta.jms.MessageProducer;
import jakarta.jms.Session;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.context.annotation.Lazy;
import org.springframework.jms.annotation.JmsListener;
import org.springframework.jms.config.JmsListenerContainerFactory;
import org.springframework.jms.config.JmsListenerEndpointRegistry;
import org.springframework.jms.config.MethodJmsListenerEndpoint;
import org.springframework.jms.core.JmsTemplate;
import org.springframework.messaging.handler.annotation.support.DefaultMessageHandlerMethodFactory;
import org.springframework.test.annotation.DirtiesContext;

/**
 * Regression (issue 37, SPEC 15 and 16), on a real embedded ActiveMQ Artemis broker:
 * {@code @Idempotent} on a {@code @JmsListener} of a {@code @Lazy} bean, created after the
 * application started (Spring JMS then registers and starts its container at once), whose session
 * Spring Boot's container transacts. The same listener on an eager bean waits for the session's
 * commit ({@code JmsIdempotentMethodTransactionTest}); this one is expected to as well: a commit
 * that fails releases the key and the broker's redelivery runs the listener again, never a replay.
 * The same holds for an {@code @Idempotent} method with no {@code @JmsListener} whose endpoint the
 * application registers after the start ({@code JmsListenerEndpointRegistry
 * .registerListenerContainer(MethodJmsListenerEndpoint, factory, true)}): its method is a listener
 * method once the factory created its container.
 */
@SpringBootTest(
    classes = LazyJmsListenerTransactionTest.App.class,
    properties = {
      "spring.artemis.mode=embedded",
      "spring.artemis.embedded.enabled=true",
      "spring.artemis.embedded.queues=idem.lazy.tx,idem.lazy.tx.out,idem.registered.tx",
      "idempotency.in-flight-wait=50ms",
      "spring.main.banner-mode=off"
    })
@DirtiesContext
class LazyJmsListenerTransactionTest {

  static final String NAME = "jms-lazy-tx-method";
  static final String REGISTERED = "jms-registered-tx-method";

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ListenerTestConfiguration.class)
  static class App {
    @Bean
    static FailingSessionCommits failingSessionCommits() {
      return new FailingSessionCommits();
    }

    @Bean
    @Lazy
    LazyListener lazyListener(FailingSessionCommits commits) {
      return new LazyListener(commits);
    }
  }

  /** Guarded with {@code @Idempotent}; sends the event on in its session. */
  public static class LazyListener {
    final Map<String, AtomicInteger> runs = new ConcurrentHashMap<>();
    private final FailingSessionCommits commits;

    LazyListener(FailingSessionCommits commits) {
      this.commits = commits;
    }

    @JmsListener(id = NAME, destination = "idem.lazy.tx")
    @Idempotent(name = NAME, key = "#event")
    public void onEvent(String event, Session session) throws JMSException {
      onEventUnguarded(event, session);
    }

    /** Registered at runtime through a {@code MethodJmsListenerEndpoint}; no annotation. */
    @Idempotent(name = REGISTERED, key = "#event")
    public void registered(String event, Session session) throws JMSException {
      onEventUnguarded(event, session);
    }

    private void onEventUnguarded(String event, Session session) throws JMSException {
      runs.computeIfAbsent(event, e -> new AtomicInteger()).incrementAndGet();
      try (MessageProducer producer =
          session.createProducer(session.createQueue("idem.lazy.tx.out"))) {
        producer.send(session.createTextMessage(event));
      }
      commits.running(event);
    }

    int runs(String event) {
      AtomicInteger count = runs.get(event);
      return count == null ? 0 : count.get();
    }
  }

  @Autowired Events events;
  @Autowired FailingSessionCommits commits;
  @Autowired JmsTemplate template;
  @Autowired ObjectProvider<LazyListener> listeners;
  @Autowired JmsListenerEndpointRegistry registry;
  @Autowired BeanFactory beanFactory;

  @Autowired
  @Qualifier("jmsListenerContainerFactory")
  JmsListenerContainerFactory<?> factory;

  @Test
  void anEndpointRegisteredAtRuntimeWhoseSessionFailedToCommitRunsAgainWhenRedelivered()
      throws Exception {
    LazyListener listener = listeners.getObject();
    MethodJmsListenerEndpoint endpoint = new MethodJmsListenerEndpoint();
    endpoint.setId(REGISTERED);
    endpoint.setDestination("idem.registered.tx");
    endpoint.setBean(listener);
    endpoint.setMethod(LazyListener.class.getMethod("registered", String.class, Session.class));
    endpoint.setBeanFactory(beanFactory);
    DefaultMessageHandlerMethodFactory methods = new DefaultMessageHandlerMethodFactory();
    methods.afterPropertiesSet();
    endpoint.setMessageHandlerMethodFactory(methods);
    registry.registerListenerContainer(endpoint, factory, true);

    String event = "registered-commit-fails-" + UUID.randomUUID().toString().substring(0, 8);
    commits.failNextCommitOf(event);
    template.convertAndSend("idem.registered.tx", event);

    await(
        "the redelivery after the failed commit, run or replayed",
        () -> listener.runs(event) >= 2 || events.count(Type.REPLAYED, REGISTERED, event) > 0);
    assertThat(events.count(Type.REPLAYED, REGISTERED, event))
        .as(
            "the redelivery of a delivery whose session rolled back is not a replay (runs %d)",
            listener.runs(event))
        .isZero();
    assertThat(listener.runs(event)).as("the listener ran again for the redelivery").isEqualTo(2);
  }

  @Test
  void aLazyListenerWhoseSessionFailedToCommitRunsAgainWhenTheBrokerRedeliversIt()
      throws Exception {
    LazyListener listener = listeners.getObject(); // created now: its container starts now
    String event = "lazy-commit-fails-" + UUID.randomUUID().toString().substring(0, 8);
    commits.failNextCommitOf(event);
    template.convertAndSend("idem.lazy.tx", event);

    await(
        "the redelivery after the failed commit, run or replayed",
        () -> listener.runs(event) >= 2 || events.count(Type.REPLAYED, NAME, event) > 0);
    assertThat(events.count(Type.REPLAYED, NAME, event))
        .as(
            "the redelivery of a delivery whose session rolled back is not a replay (runs %d)",
            listener.runs(event))
        .isZero();
    assertThat(listener.runs(event)).as("the listener ran again for the redelivery").isEqualTo(2);
  }
}
