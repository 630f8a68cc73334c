package dev.idempotency.spring.messaging.jms;

import dev.idempotency.spring.messaging.Polling;
import jakarta.jms.Message;
import jakarta.jms.TextMessage;
import java.util.ArrayList;
import java.util.Enumeration;
import java.util.List;
import org.springframework.jms.JmsException;
import org.springframework.jms.core.BrowserCallback;
import org.springframework.jms.core.JmsTemplate;

/**
 * Browses a queue of the embedded broker for a test. A listener's commit that fails with a {@code
 * JMSException} makes Spring's container recover, which resets the connection the application's
 * {@code CachingConnectionFactory} shares with the test's {@link JmsTemplate}: a browse that
 * overlaps it fails with "Session is closed". Such a browse is tried again, for at most {@link
 * Polling#TIMEOUT}.
 */
final class QueueBrowsing {

  private QueueBrowsing() {}

  /** The texts of the messages in {@code queue}, committed ones only, in order. */
  static List<String> texts(JmsTemplate template, String queue) {
    return browse(
        template,
        queue,
        (session, browser) -> {
          List<String> texts = new ArrayList<>();
          Enumeration<?> messages = browser.getEnumeration();
          while (messages.hasMoreElements()) {
            Message message = (Message) messages.nextElement();
            texts.add(((TextMessage) message).getText());
          }
          return texts;
        });
  }

  /** Whether {@code queue} holds no message. */
  static boolean isEmpty(JmsTemplate template, String queue) {
    return browse(
        template, queue, (session, browser) -> !browser.getEnumeration().hasMoreElements());
  }

  private static <T> T browse(JmsTemplate template, String queue, BrowserCallback<T> callback) {
    long deadline = System.nanoTime() + Polling.TIMEOUT.toNanos();
    while (true) {
      try {
        return template.browse(queue, callback);
      } catch (JmsException closedByRecovery) {
        if (System.nanoTime() - deadline > 0) {
          throw closedByRecovery;
        }
        try {
          Thread.sleep(20);
        } catch (InterruptedException interrupted) {
          Thread.currentThread().interrupt();
          throw closedByRecovery;
        }
      }
    }
  }
}
