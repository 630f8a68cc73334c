package dev.idempotency.spring.messaging.jms;

import dev.idempotency.spring.messaging.IdempotentListener;
import jakarta.jms.JMSException;
import jakarta.jms.Message;
import jakarta.jms.Session;
import jakarta.jms.TextMessage;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.springframework.jms.annotation.JmsListener;
import org.springframework.jms.support.converter.MessageConverter;

/**
 * Record listeners of {@link JmsListenerTest} whose payload is a {@code List} (issue 37, probe45a's
 * finding: JMS has no batch listeners, yet such a listener was taken for one). Their container
 * factory converts a text of comma-separated lines to a {@code List<String>}, as a JSON converter
 * would an array, independent of the Jackson line (Boot 3.5 vs 4.0).
 */
final class JmsListPayloads {

  static final String FACTORY = "commaSeparatedListFactory";

  private JmsListPayloads() {}

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
    @JmsListener(
        id = "jms-list-header",
        destination = "idem.list-header",
        containerFactory = FACTORY)
    @IdempotentListener(name = "jms-list-header")
    public void fromHeader(List<String> lines) {
      headerRuns.add(new ArrayList<>(lines));
    }

    /** The key is the whole payload: a list of strings, a stable value (SPEC 13). */
    @JmsListener(
        id = "jms-list-payload",
        destination = "idem.list-payload",
        containerFactory = FACTORY)
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
}
