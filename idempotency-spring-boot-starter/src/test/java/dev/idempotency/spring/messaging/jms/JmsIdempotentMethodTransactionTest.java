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
 * {@code @Idempotent} on a {@code @JmsListener} whose session Spring Boot's container transacts, on
 * a real ActiveMQ Artemis broker (issue 37, SPEC 15 and 16): its outcome waits for the session's
 * commit, as an {@code IdempotentListener}'s does ({@code JmsTransactionTest}). A commit that fails
 * releases the key, so the broker's redelivery runs the listener again (the message it sent in the
 * rolled-back session is sent again); a delivery whose session committed is recorded, and a repeat
 * of its key is a replay. The same listener on a {@code @Lazy} bean, created after the application
 * started (Spring JMS then registers and starts its container at once), waits for the commit too
 * (issue 37's regression), and so does an {@code @Idempotent} method whose endpoint the application
 * registers at runtime.
 */
@SpringBootTest(
    classes = JmsIdempotentMethodTransactionTest.App.class,
    properties = {
      "spring.artemis.mode=embedded",
      "spring.artemis.embedded.enabled=true",
      "spring.artemis.embedded.queues=idem.method.tx,idem.method.tx.out,idem.lazy.tx,idem.lazy.tx.out,idem.registered.tx",
      "idempotency.in-flight-wait=50ms",
      "spring.main.banner-mode=off"
    })
@DirtiesContext
class JmsIdempotentMethodTransactionTest {

  static final String NAME = "jms-tx-method";
  static final String LAZY_NAME = "jms-lazy-tx-method";
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
    MethodListener methodListener(FailingSessionCommits commits) {
      return new MethodListener(commits);
    }

    @Bean
    @Lazy
    LazyListener lazyListener(FailingSessionCommits commits) {
      return new LazyListener(commits);
    }
  }

  /** A listener's work: sends the event on in its session, and counts its runs. */
  abstract static class Runs {
    final Map<String, AtomicInteger> runs = new ConcurrentHashMap<>();
    private final FailingSessionCommits commits;

    Runs(FailingSessionCommits commits) {
      this.commits = commits;
    }

    void run(String event, Session session, String out) throws JMSException {
      runs.computeIfAbsent(event, e -> new AtomicInteger()).incrementAndGet();
      try (MessageProducer producer = session.createProducer(session.createQueue(out))) {
        producer.send(session.createTextMessage(event));
      }
      commits.running(event);
    }

    int runs(String event) {
      AtomicInteger count = runs.get(event);
      return count == null ? 0 : count.get();
    }
  }

  /** Guarded with {@code @Idempotent}; sends the event on in its session. */
  public static class MethodListener extends Runs {
    MethodListener(FailingSessionCommits commits) {
      super(commits);
    }

    @JmsListener(id = NAME, destination = "idem.method.tx")
    @Idempotent(name = NAME, key = "#event")
    public void onEvent(String event, Session session) throws JMSException {
      run(event, session, "idem.method.tx.out");
    }
  }

  /** The same on a {@code @Lazy} bean: its container is created when the bean is. */
  public static class LazyListener extends Runs {
    LazyListener(FailingSessionCommits commits) {
      super(commits);
    }

    @JmsListener(id = LAZY_NAME, destination = "idem.lazy.tx")
    @Idempotent(name = LAZY_NAME, key = "#event")
    public void onEvent(String event, Session session) throws JMSException {
      run(event, session, "idem.lazy.tx.out");
    }

    /** Registered at runtime through a {@code MethodJmsListenerEndpoint}; no annotation. */
    @Idempotent(name = REGISTERED, key = "#event")
    public void registered(String event, Session session) throws JMSException {
      run(event, session, "idem.lazy.tx.out");
    }
  }

  @Autowired Events events;
  @Autowired FailingSessionCommits commits;
  @Autowired JmsTemplate template;
  @Autowired MethodListener listener;
  @Autowired ObjectProvider<LazyListener> lazyListeners;
  @Autowired JmsListenerEndpointRegistry registry;
  @Autowired BeanFactory beanFactory;

  @Autowired
  @Qualifier("jmsListenerContainerFactory")
  JmsListenerContainerFactory<?> factory;

  @Test
  void aDeliveryWhoseSessionFailedToCommitRunsAgainWhenTheBrokerRedeliversIt() throws Exception {
    assertACommitThatFailsRunsAgain(listener, NAME, "idem.method.tx");
  }

  @Test
  void aLazyListenerWhoseSessionFailedToCommitRunsAgainWhenTheBrokerRedeliversIt()
      throws Exception {
    LazyListener lazy = lazyListeners.getObject(); // created now: its container starts now
    assertACommitThatFailsRunsAgain(lazy, LAZY_NAME, "idem.lazy.tx");
  }

  /**
   * An {@code @Idempotent} method with no {@code @JmsListener} whose endpoint the application
   * registers after the start ({@code registerListenerContainer(MethodJmsListenerEndpoint, factory,
   * true)}) is a listener method once the factory created its container: it waits for the commit.
   */
  @Test
  void anEndpointRegisteredAtRuntimeWhoseSessionFailedToCommitRunsAgainWhenRedelivered()
      throws Exception {
    LazyListener lazy = lazyListeners.getObject();
    MethodJmsListenerEndpoint endpoint = new MethodJmsListenerEndpoint();
    endpoint.setId(REGISTERED);
    endpoint.setDestination("idem.registered.tx");
    endpoint.setBean(lazy);
    endpoint.setMethod(LazyListener.class.getMethod("registered", String.class, Session.class));
    endpoint.setBeanFactory(beanFactory);
    DefaultMessageHandlerMethodFactory methods = new DefaultMessageHandlerMethodFactory();
    methods.afterPropertiesSet();
    endpoint.setMessageHandlerMethodFactory(methods);
    registry.registerListenerContainer(endpoint, factory, true);

    assertACommitThatFailsRunsAgain(lazy, REGISTERED, "idem.registered.tx");
  }

  /**
   * Sends with the test's template, again (up to 20 times, 250 ms apart) while the shared
   * connection is being reset: a listener container's recovery after an earlier row's failed commit
   * destroys the cached connection, and a send on it meanwhile fails before it reaches the broker
   * ("AMQ219010: Connection is destroyed", seen on Boot 4.0 in a loaded clean-clone run and in a
   * run of this class alone). Every send of this class goes through it: the send is the test's
   * set-up, not what it checks.
   */
  private void sendPastAResetConnection(String queue, String event) throws InterruptedException {
    for (int attempt = 1; ; attempt++) {
      try {
        template.convertAndSend(queue, event);
        return;
      } catch (org.springframework.jms.JmsException e) {
        if (attempt == 20 || !connectionDestroyed(e)) {
          throw e;
        }
        Thread.sleep(250);
      }
    }
  }

  private static boolean connectionDestroyed(Throwable e) {
    for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (String.valueOf(t.getMessage()).contains("Connection is destroyed")) {
        return true;
      }
    }
    return false;
  }

  private void assertACommitThatFailsRunsAgain(Runs listener, String name, String queue)
      throws Exception {
    String event = "commit-fails-" + UUID.randomUUID().toString().substring(0, 8);
    commits.failNextCommitOf(event);
    sendPastAResetConnection(queue, event);

    await(
        "the redelivery after the failed commit, run or replayed",
        () -> listener.runs(event) >= 2 || events.count(Type.REPLAYED, name, event) > 0);
    await(
        "the outcome of a run whose commit succeeded recorded",
        () -> events.count(Type.COMPLETED, name, event) == 1);
    // the failed commit released the key and the redelivery ran the listener again; under load a
    // redelivery's own commit may fail too (a sibling container's recovery resets the shared
    // connection: "Session is closed"), which releases and runs once more: each release, one run
    assertThat(events.count(Type.REPLAYED, name, event))
        .as(
            "the redelivery of a delivery whose session rolled back is not a replay (runs %d)",
            listener.runs(event))
        .isZero();
    long released = events.count(Type.RELEASED, name, event);
    assertThat(released).as("the rolled-back delivery released its key").isGreaterThanOrEqualTo(1);
    assertThat((long) listener.runs(event))
        .as("the listener ran again for each released delivery (released %d)", released)
        .isEqualTo(released + 1);
  }

  @Test
  void aDeliveryWhoseSessionCommittedIsRecordedAndARepeatIsAReplay() throws Exception {
    String event = "commits-" + UUID.randomUUID().toString().substring(0, 8);
    sendPastAResetConnection("idem.method.tx", event);
    await(
        "the outcome recorded after the commit",
        () -> events.count(Type.COMPLETED, NAME, event) == 1);

    sendPastAResetConnection("idem.method.tx", event);
    await("the repeat replayed", () -> events.count(Type.REPLAYED, NAME, event) == 1);
    assertThat(listener.runs(event)).as("the listener ran for the first message only").isEqualTo(1);
  }
}
