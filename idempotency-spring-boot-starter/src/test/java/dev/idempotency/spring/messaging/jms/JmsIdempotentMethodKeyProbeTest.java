package dev.idempotency.spring.messaging.jms;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.Idempotent;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import dev.idempotency.spring.messaging.Polling;
import jakarta.jms.JMSException;
import jakarta.jms.Message;
import jakarta.jms.TextMessage;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
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
 * Probe (probeV) of fixmethodkey (78bd80e) on JMS, which its tests did not reach:
 * {@code @Idempotent} (not {@code @IdempotentListener}) on a {@code @JmsListener}, on a real
 * embedded ActiveMQ Artemis (Spring Boot's defaults: transacted sessions, ten delivery attempts,
 * then the {@code DLQ} address). A key SpEL cannot evaluate for the message ({@code
 * InvalidKeyException}): JMS has no reject, so the message is rolled back until Artemis
 * dead-letters it, never sent. A key whose static look-up fails once (transient): rolled back, and
 * the redelivery sends it once, never dead-lettered, and the queue moves on.
 */
@SpringBootTest(
    classes = JmsIdempotentMethodKeyProbeTest.App.class,
    properties = {
      "spring.artemis.mode=embedded",
      "spring.artemis.embedded.enabled=true",
      "spring.artemis.embedded.queues=idem.probe-v.method-key",
      "idempotency.in-flight-wait=50ms",
      "spring.main.banner-mode=off",
      "logging.level.org.springframework.jms.listener=OFF"
    })
@DirtiesContext
class JmsIdempotentMethodKeyProbeTest {

  static final String QUEUE = "idem.probe-v.method-key";
  static final String NAME = "probe-v-jms-method-key";

  /** The key look-up: fails the first time for a payload holding "flaky". */
  public static final class Keys {
    static final Set<String> failedOnce = ConcurrentHashMap.newKeySet();
    static final Map<String, AtomicInteger> asked = new ConcurrentHashMap<>();

    private Keys() {}

    public static String of(String payload) {
      asked.computeIfAbsent(payload, p -> new AtomicInteger()).incrementAndGet();
      if (payload.startsWith("flaky") && failedOnce.add(payload)) {
        throw new IllegalStateException("key look-up timed out (transient)");
      }
      return payload.split("\\|")[1];
    }
  }

  public static class Listener {
    final List<String> sent = new CopyOnWriteArrayList<>();
    final Map<String, AtomicInteger> deliveries = new ConcurrentHashMap<>();

    @JmsListener(id = NAME, destination = QUEUE)
    @Idempotent(
        name = NAME,
        key =
            "#p0.startsWith('flaky') ? T("
                + "dev.idempotency.spring.messaging.jms.JmsIdempotentMethodKeyProbeTest$Keys"
                + ").of(#p0) : #p0.split('\\|')[1]")
    public void onEvent(String event) {
      sent.add(event);
    }

    long sends(String event) {
      return sent.stream().filter(event::equals).count();
    }
  }

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ListenerTestConfiguration.class)
  static class App {
    @Bean
    Listener probeVJmsListener() {
      return new Listener();
    }
  }

  @Autowired JmsTemplate template;
  @Autowired Listener listener;
  private final List<String> deadLetters = new CopyOnWriteArrayList<>();

  @Test
  void aKeyThatCannotBeEvaluatedIsDeadLetteredUnsent() throws Exception {
    String event = "plain-no-bar-" + UUID.randomUUID();
    template.convertAndSend(QUEUE, event);
    Polling.await("the message dead-lettered", () -> deadLettered().contains(event));
    assertThat(listener.sends(event)).as("sends").isZero();
  }

  @Test
  void aKeyWhoseLookUpFailsOnceIsSentOnceNotDeadLettered() throws Exception {
    String event = "flaky|" + UUID.randomUUID();
    template.convertAndSend(QUEUE, event);
    Polling.await(
        "sent, or dead-lettered",
        () -> listener.sends(event) > 0 || deadLettered().contains(event));
    String after = "plain|" + UUID.randomUUID(); // a later message, to see the queue has moved on
    template.convertAndSend(QUEUE, after);
    Polling.await("the later message sent", () -> listener.sends(after) > 0);
    assertThat(deadLettered()).as("dead-lettered").doesNotContain(event);
    assertThat(listener.sends(event)).as("sends (look-ups %s)", Keys.asked.get(event)).isEqualTo(1);
  }

  private List<String> deadLettered() {
    long timeout = template.getReceiveTimeout();
    template.setReceiveTimeout(JmsTemplate.RECEIVE_TIMEOUT_NO_WAIT);
    try {
      Message message;
      while ((message = template.receive("DLQ")) != null) {
        deadLetters.add(((TextMessage) message).getText());
      }
    } catch (JMSException e) {
      throw new IllegalStateException(e);
    } finally {
      template.setReceiveTimeout(timeout);
    }
    return List.copyOf(deadLetters);
  }
}
