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
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.context.annotation.Lazy;
import org.springframework.jms.annotation.JmsListener;
import org.springframework.jms.core.JmsTemplate;
import org.springframework.test.annotation.DirtiesContext;

/**
 * Regression (issue 37, SPEC 15 and 16), on a real embedded ActiveMQ Artemis broker:
 * {@code @Idempotent} on a {@code @JmsListener} of a {@code @Lazy} bean, created after the
 * application started (Spring JMS then registers and starts its container at once), whose session
 * Spring Boot's container transacts. The same listener on an eager bean waits for the session's
 * commit ({@code JmsIdempotentMethodTransactionTest}); this one is expected to as well: a commit
 * that fails releases the key and the broker's redelivery runs the listener again, never a replay.
 */
@SpringBootTest(
    classes = LazyJmsListenerTransactionTest.App.class,
    properties = {
      "spring.artemis.mode=embedded",
      "spring.artemis.embedded.enabled=true",
      "spring.artemis.embedded.queues=idem.lazy.tx,idem.lazy.tx.out",
      "idempotency.in-flight-wait=50ms",
      "spring.main.banner-mode=off"
    })
@DirtiesContext
class LazyJmsListenerTransactionTest {

  static final String NAME = "jms-lazy-tx-method";

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
