package dev.idempotency.spring.messaging.jms;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.ListenerContract;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import dev.idempotency.spring.messaging.Sends;
import jakarta.jms.ConnectionFactory;
import jakarta.jms.Message;
import jakarta.jms.TextMessage;
import java.util.Collections;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.jms.config.DefaultJmsListenerContainerFactory;
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
      "spring.artemis.embedded.queues=idem.record,idem.dead-letter,idem.header,idem.keyed,"
          + "idem.list-header,idem.list-payload",
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

    @Bean
    JmsListPayloads.ListListeners listListeners() {
      return new JmsListPayloads.ListListeners();
    }

    /** Boot's listener containers' settings (transacted sessions), with a converter of lists. */
    @Bean(JmsListPayloads.FACTORY)
    DefaultJmsListenerContainerFactory commaSeparatedListFactory(
        ConnectionFactory connectionFactory) {
      DefaultJmsListenerContainerFactory factory = new DefaultJmsListenerContainerFactory();
      factory.setConnectionFactory(connectionFactory);
      factory.setSessionTransacted(true);
      factory.setMessageConverter(new JmsListPayloads.CommaSeparatedLists());
      return factory;
    }
  }

  @Autowired JmsTemplate template;
  @Autowired JmsListPayloads.ListListeners listListeners;
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

  /**
   * A JMS listener is always a record listener; one whose payload is a {@code List} was taken for a
   * batch listener (issue 37, probe45a's finding): its header key was looked for in each element
   * (dead-lettered, never sent), its payload key per element (a shortened list). Failed before.
   */
  @Test
  void aListPayloadWithItsKeyInAHeaderRunsOnceWithTheWholeListAndIsNotDeadLettered()
      throws Exception {
    String id = UUID.randomUUID().toString().substring(0, 8);
    List<String> lines = List.of("a-" + id, "b-" + id);
    publishList("idem.list-header", lines, "order-" + id);

    await(
        "the listener ran, or the message reached the DLQ",
        () ->
            !listListeners.headerRuns().isEmpty()
                || deadLettered(JmsListeners.RECORD).contains(String.join(",", lines)));
    assertThat(deadLettered(JmsListeners.RECORD))
        .as("dead-lettered")
        .doesNotContain(String.join(",", lines));
    assertThat(listListeners.headerRuns()).as("the listener's runs").containsExactly(lines);
  }

  @Test
  void twoDeliveriesWithDifferentListsAreTwoKeysAndEachRunsWithItsWholeList() throws Exception {
    String id = UUID.randomUUID().toString().substring(0, 8);
    List<String> first = List.of("x-" + id, "y-" + id);
    List<String> second = List.of("y-" + id, "z-" + id);
    publishList("idem.list-payload", first, null);
    await("the first list ran", () -> listListeners.payloadRuns().contains(first));
    publishList("idem.list-payload", second, null);
    await(
        "the second delivery ran, or reached the DLQ",
        () ->
            listListeners.payloadRuns().size() >= 2
                || deadLettered(JmsListeners.RECORD).contains(String.join(",", second)));

    assertThat(listListeners.payloadRuns())
        .as("a record listener's key is its payload, the whole list: two lists, two sends")
        .containsExactly(first, second);
  }

  private void publishList(String queue, List<String> lines, String idempotencyKey) {
    listTemplate()
        .convertAndSend(
            queue,
            lines,
            message -> {
              if (idempotencyKey != null) {
                message.setStringProperty("Idempotency_Key", idempotencyKey);
              }
              return message;
            });
  }

  private JmsTemplate listTemplate() {
    JmsTemplate lists = new JmsTemplate(template.getConnectionFactory());
    lists.setMessageConverter(new JmsListPayloads.CommaSeparatedLists());
    return lists;
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
