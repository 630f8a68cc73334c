package dev.idempotency.spring.messaging.jms;

import dev.idempotency.spring.messaging.ListenerContract;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import dev.idempotency.spring.messaging.Sends;
import jakarta.jms.Message;
import jakarta.jms.TextMessage;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.jms.core.JmsTemplate;
import org.springframework.test.annotation.DirtiesContext;

/**
 * Issue 27's table on a real ActiveMQ Artemis broker, embedded by Spring Boot's Artemis
 * auto-configuration with its defaults: ten delivery attempts, then the {@code DLQ} address. The
 * listener containers' sessions are transacted (Boot's default), so a failed delivery is rolled
 * back and redelivered. JMS has no batch listeners.
 */
@SpringBootTest(
    classes = JmsListenerTest.App.class,
    properties = {
      "spring.artemis.mode=embedded",
      "spring.artemis.embedded.enabled=true",
      "spring.artemis.embedded.queues=idem.record,idem.dead-letter,idem.header,idem.keyed",
      "idempotency.in-flight-wait=50ms",
      "idempotency.messaging.back-off.initial=50ms",
      "idempotency.messaging.back-off.max=300ms",
      "spring.main.banner-mode=off"
    })
@DirtiesContext
class JmsListenerTest extends ListenerContract {

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ListenerTestConfiguration.class)
  static class App {
    @Bean
    JmsListeners jmsListeners(Sends sends) {
      return new JmsListeners(sends);
    }
  }

  @Autowired JmsTemplate template;
  private final List<String> deadLetters = new CopyOnWriteArrayList<>();

  static String queue(String listener) {
    return switch (listener) {
      case JmsListeners.RECORD -> "idem.record";
      case JmsListeners.DEAD_LETTER -> "idem.dead-letter";
      case JmsListeners.HEADER -> "idem.header";
      case JmsListeners.KEYED -> "idem.keyed";
      default -> throw new IllegalArgumentException(listener);
    };
  }

  @Override
  protected String recordListener() {
    return JmsListeners.RECORD;
  }

  @Override
  protected String deadLetterListener() {
    return JmsListeners.DEAD_LETTER;
  }

  @Override
  protected String keyedListener() {
    return JmsListeners.KEYED;
  }

  /** Rolled back: Artemis redelivers it up to its ten delivery attempts, then to its DLQ. */
  @Override
  protected int deliveriesOfAPoisonMessage() {
    return 10;
  }

  @Override
  protected String headerListener() {
    return JmsListeners.HEADER;
  }

  @Override
  protected void publish(String listener, String payload, String idempotencyKey) {
    template.convertAndSend(
        queue(listener),
        payload,
        message -> {
          if (idempotencyKey != null) {
            message.setStringProperty("Idempotency_Key", idempotencyKey);
          }
          return message;
        });
  }

  /** Drains Artemis's DLQ into what this test has seen of it (payloads are unique per test). */
  @Override
  protected List<String> deadLettered(String listener) {
    long timeout = template.getReceiveTimeout();
    template.setReceiveTimeout(JmsTemplate.RECEIVE_TIMEOUT_NO_WAIT);
    try {
      Message message;
      while ((message = template.receive("DLQ")) != null) {
        deadLetters.add(((TextMessage) message).getText());
      }
    } catch (jakarta.jms.JMSException e) {
      throw new IllegalStateException(e);
    } finally {
      template.setReceiveTimeout(timeout);
    }
    return Collections.unmodifiableList(deadLetters);
  }

  /** Nothing is left in the queue, delivered or not. */
  @Override
  protected void assertAcknowledged(String listener) throws Exception {
    await(
        "an empty queue",
        () ->
            template.browse(
                    queue(listener),
                    (session, browser) -> browser.getEnumeration().hasMoreElements())
                == Boolean.FALSE);
  }
}
