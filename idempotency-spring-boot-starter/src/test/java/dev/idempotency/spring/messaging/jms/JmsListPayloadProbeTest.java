package dev.idempotency.spring.messaging.jms;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.IdempotentListener;
import jakarta.jms.JMSException;
import jakarta.jms.Message;
import jakarta.jms.Session;
import jakarta.jms.TextMessage;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.jms.annotation.JmsListener;
import org.springframework.jms.core.JmsTemplate;
import org.springframework.jms.support.converter.MessageConverter;
import org.springframework.test.annotation.DirtiesContext;

/**
 * Probe (issue 37, probe45a): a JMS listener is always a record listener (JMS has no batch
 * listeners), but one whose payload is a {@code List} (a JSON array, here a comma-separated text
 * that the application's converter turns into a {@code List<String>}) is taken by the starter for a
 * batch listener ({@code BatchParameters.indexOf}: the first {@code List} parameter that is not a
 * header). SPEC 15: the key comes from a header or from the payload, and each delivery runs the
 * listener at most once per key, with its whole payload.
 *
 * <p>Real embedded Artemis (Boot's auto-configuration, transacted sessions, ten delivery attempts,
 * then {@code DLQ}). The converter is the application's own, as a JSON converter would be; a
 * comma-separated text keeps the probe independent of the Jackson line (Boot 3.5 vs 4.0).
 */
@Tag("open-finding")
@SpringBootTest(
    classes = JmsListPayloadProbeTest.App.class,
    properties = {
      "spring.artemis.mode=embedded",
      "spring.artemis.embedded.enabled=true",
      "spring.artemis.embedded.queues=idem.list-header,idem.list-payload",
      "idempotency.in-flight-wait=50ms",
      "idempotency.messaging.back-off.initial=50ms",
      "idempotency.messaging.back-off.max=300ms",
      "spring.main.banner-mode=off"
    })
@DirtiesContext
class JmsListPayloadProbeTest {

  private static final Duration TIMEOUT = Duration.ofSeconds(60);

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  static class App {
    @Bean
    ListListeners listListeners() {
      return new ListListeners();
    }

    @Bean
    MessageConverter commaSeparatedLists() {
      return new CommaSeparatedLists();
    }
  }

  /** Record listeners whose payload is a list of lines (read through methods: a proxied bean). */
  public static class ListListeners {
    private final List<List<String>> headerRuns = new CopyOnWriteArrayList<>();
    private final List<List<String>> payloadRuns = new CopyOnWriteArrayList<>();

    public List<List<String>> headerRuns() {
      return headerRuns;
    }

    public List<List<String>> payloadRuns() {
      return payloadRuns;
    }

    /** The key is the producer's {@code Idempotency_Key} property (the default header). */
    @JmsListener(id = "jms-list-header", destination = "idem.list-header")
    @IdempotentListener(name = "jms-list-header")
    public void fromHeader(List<String> lines) {
      headerRuns.add(new ArrayList<>(lines));
    }

    /** The key is the whole payload: a list of strings, a stable value (SPEC 13). */
    @JmsListener(id = "jms-list-payload", destination = "idem.list-payload")
    @IdempotentListener(name = "jms-list-payload", key = "#payload")
    public void fromPayload(List<String> lines) {
      payloadRuns.add(new ArrayList<>(lines));
    }
  }

  /** A text message of comma-separated lines is a {@code List<String>}, and back. */
  static final class CommaSeparatedLists implements MessageConverter {
    @Override
    public Message toMessage(Object object, Session session) throws JMSException {
      List<String> lines = new ArrayList<>();
      for (Object line : (List<?>) object) {
        lines.add(String.valueOf(line));
      }
      return session.createTextMessage(String.join(",", lines));
    }

    @Override
    public Object fromMessage(Message message) throws JMSException {
      return List.of(((TextMessage) message).getText().split(","));
    }
  }

  @Autowired JmsTemplate template;
  @Autowired ListListeners listeners;
  private final List<String> deadLetters = new CopyOnWriteArrayList<>();

  @Test
  void aListPayloadWithItsKeyInAHeaderRunsOnceWithTheWholeListAndIsNotDeadLettered()
      throws Exception {
    String id = UUID.randomUUID().toString().substring(0, 8);
    List<String> lines = List.of("a-" + id, "b-" + id);
    publish("idem.list-header", lines, "order-" + id);

    await(
        "the listener ran, or the message reached the DLQ",
        () ->
            !listeners.headerRuns().isEmpty() || deadLettered().contains(String.join(",", lines)));
    assertThat(deadLettered()).as("dead-lettered").doesNotContain(String.join(",", lines));
    assertThat(listeners.headerRuns()).as("the listener's runs").containsExactly(lines);
  }

  @Test
  void twoDeliveriesWithDifferentListsAreTwoKeysAndEachRunsWithItsWholeList() throws Exception {
    String id = UUID.randomUUID().toString().substring(0, 8);
    List<String> first = List.of("x-" + id, "y-" + id);
    List<String> second = List.of("y-" + id, "z-" + id);
    publish("idem.list-payload", first, null);
    await("the first list ran", () -> listeners.payloadRuns().contains(first));
    publish("idem.list-payload", second, null);
    await(
        "the second delivery ran, or reached the DLQ",
        () ->
            listeners.payloadRuns().size() >= 2
                || deadLettered().contains(String.join(",", second)));

    assertThat(listeners.payloadRuns())
        .as("a record listener's key is its payload, the whole list: two lists, two sends")
        .containsExactly(first, second);
  }

  private void publish(String queue, List<String> lines, String idempotencyKey) {
    template.convertAndSend(
        queue,
        lines,
        message -> {
          if (idempotencyKey != null) {
            message.setStringProperty("Idempotency_Key", idempotencyKey);
          }
          return message;
        });
  }

  /** Drains Artemis's DLQ into what this test has seen of it. */
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
    return Collections.unmodifiableList(deadLetters);
  }

  private static void await(String what, BooleanSupplier condition) throws InterruptedException {
    long deadline = System.nanoTime() + TIMEOUT.toNanos();
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("timed out after " + TIMEOUT.toSeconds() + " s: " + what);
      }
      Thread.sleep(20);
    }
  }
}
