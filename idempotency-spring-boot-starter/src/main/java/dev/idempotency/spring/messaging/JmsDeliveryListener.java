package dev.idempotency.spring.messaging;

import jakarta.jms.BytesMessage;
import jakarta.jms.Destination;
import jakarta.jms.JMSException;
import jakarta.jms.MapMessage;
import jakarta.jms.Message;
import jakarta.jms.MessageListener;
import jakarta.jms.MessageProducer;
import jakarta.jms.Session;
import jakarta.jms.TextMessage;
import java.time.Duration;
import java.util.Enumeration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.jms.listener.SessionAwareMessageListener;

/**
 * The JMS side of {@link IdempotentListener}: wraps a listener container's message listener.
 *
 * <ul>
 *   <li>binds the message's properties to the thread, for header keys;
 *   <li>a deferred delivery (the key in flight elsewhere, the store down; also one whose deferral
 *       an application's advice on the listener bean dropped, {@link Delivery.KeptDeferral}) is not
 *       rolled back, which would count toward the broker's maximum delivery attempts and end in its
 *       dead-letter address: a copy of the message (body, properties, type, correlation id,
 *       reply-to) is sent to its destination with a delivery delay (JMS 2.0), in the listener's
 *       session, and the original acknowledged with it (one local transaction when the session is
 *       transacted, as Spring Boot's listener containers are by default). The copy carries the
 *       number of deferrals in property {@value #DEFERRALS}, which grows the delay. Messages of
 *       another type than text, bytes or map are rolled back instead;
 *   <li>every other failure goes on to the container unchanged (rollback; the broker's redelivery
 *       and dead-letter settings apply);
 *   <li>in a session the container transacts itself (Spring Boot's default: {@code
 *       sessionTransacted}, no transaction manager), the outcome of a listener that ran waits for
 *       the session's commit ({@link ContainerTransactions}): the session is committed here once
 *       the listener returned (its acknowledgement and what the listener sent in it), then the
 *       outcome is recorded; a commit that fails releases the key and goes on to the container,
 *       which rolls back, and the broker delivers the message again. A commit that fails because
 *       the container interrupted the thread (it shuts down) is tried again, and never releases the
 *       key; one on a session closed under the delivery leaves the key claimed until its lease runs
 *       out ({@link JmsSessionCommit}).
 * </ul>
 */
final class JmsDeliveryListener implements SessionAwareMessageListener<Message> {

  /** The property that counts a message's deferrals. */
  static final String DEFERRALS = "IdempotencyDeferrals";

  private static final Logger log = LoggerFactory.getLogger(IdempotentListener.class);

  final Object delegate;
  private final DeliveryBackOff backOff;

  JmsDeliveryListener(Object delegate, DeliveryBackOff backOff) {
    this.delegate = delegate;
    this.backOff = backOff;
  }

  @Override
  public void onMessage(Message message, Session session) throws JMSException {
    // on the container's consumer thread: an interrupt a guarded send leaves is cleared as the
    // listener returns (ConsumerThreadInterrupts), before the commit or acknowledgement
    Delivery delivery =
        new Delivery(List.of(properties(message)), false, Delivery.WHOLE_BATCH, true);
    Delivery previous = Delivery.bind(delivery);
    // a session the container transacts itself: no Spring synchronization tells of its commit
    boolean local =
        session != null && session.getTransacted() && !ContainerTransactions.springSynchronized();
    List<ContainerTransactions.Completion> outer =
        local ? ContainerTransactions.beginLocal() : null;
    boolean listenerReturned = false;
    try {
      invokeDelegate(message, session, delivery);
      listenerReturned = true;
    } finally {
      Delivery.restore(previous);
      if (!listenerReturned) {
        // the container rolls the session back now, and Artemis's rollback fails on a thread the
        // application left interrupted (a provider client interrupted mid-send, then failing): the
        // message was then acknowledged and never delivered again, a lost send
        ConsumerThreadInterrupts.clearBeforeRollback(delegate);
      }
      if (local) {
        List<ContainerTransactions.Completion> completions = ContainerTransactions.endLocal(outer);
        if (!listenerReturned) {
          ContainerTransactions.complete(completions, false);
        } else if (!completions.isEmpty()) {
          JmsSessionCommit.commitThenComplete(session, completions, delegate, message);
        }
      }
    }
  }

  /**
   * Runs the listener; a deferral it throws, or one the guard kept for the delivery while an
   * application's advice on the listener bean dropped it ({@link Delivery.KeptDeferral}), sends the
   * message again later.
   */
  @SuppressWarnings("unchecked")
  private void invokeDelegate(Message message, Session session, Delivery delivery)
      throws JMSException {
    RuntimeException deferred;
    try {
      if (delegate instanceof SessionAwareMessageListener<?> aware) {
        ((SessionAwareMessageListener<Message>) aware).onMessage(message, session);
      } else {
        ((MessageListener) delegate).onMessage(message);
      }
      Throwable kept = delivery.deferral().get();
      if (kept == null) {
        return;
      }
      deferred =
          kept instanceof RuntimeException runtime
              ? runtime
              : new IllegalStateException("deferred", kept);
    } catch (RuntimeException failure) {
      if (DeferredDeliveryException.deferralIn(failure) == null
          && delivery.deferral().get() == null) {
        throw failure;
      }
      deferred = failure;
    }
    if (!sendAgainLater(message, session)) {
      throw deferred;
    }
  }

  private static Map<String, Object> properties(Message message) throws JMSException {
    Map<String, Object> properties = new LinkedHashMap<>();
    Enumeration<?> names = message.getPropertyNames();
    while (names.hasMoreElements()) {
      String name = (String) names.nextElement();
      properties.put(name, message.getObjectProperty(name));
    }
    return properties;
  }

  /** Sends the copy with its delay; {@code false} for a message it cannot copy. */
  private boolean sendAgainLater(Message message, Session session) throws JMSException {
    Message copy = copy(message, session);
    if (copy == null) {
      log.warn(
          "A deferred JMS delivery of type {} cannot be copied; it is rolled back, and counts"
              + " toward the broker's delivery attempts",
          message.getClass().getName());
      return false;
    }
    int deferrals = message.propertyExists(DEFERRALS) ? message.getIntProperty(DEFERRALS) : 0;
    Duration delay = backOff.delay(deferrals);
    copy.setIntProperty(DEFERRALS, deferrals + 1);
    Destination destination = message.getJMSDestination();
    long timeToLive = 0;
    if (message.getJMSExpiration() > 0) {
      timeToLive = Math.max(1, message.getJMSExpiration() - System.currentTimeMillis());
    }
    try (MessageProducer producer = session.createProducer(destination)) {
      producer.setDeliveryDelay(delay.toMillis());
      producer.send(copy, message.getJMSDeliveryMode(), message.getJMSPriority(), timeToLive);
    }
    log.debug("Deferred a JMS delivery by {} ms (deferral {})", delay.toMillis(), deferrals + 1);
    return true;
  }

  private static Message copy(Message message, Session session) throws JMSException {
    Message copy;
    if (message instanceof TextMessage text) {
      copy = session.createTextMessage(text.getText());
    } else if (message instanceof BytesMessage bytes) {
      bytes.reset();
      byte[] body = new byte[(int) bytes.getBodyLength()];
      bytes.readBytes(body);
      BytesMessage copied = session.createBytesMessage();
      copied.writeBytes(body);
      copy = copied;
    } else if (message instanceof MapMessage map) {
      MapMessage copied = session.createMapMessage();
      Enumeration<?> names = map.getMapNames();
      while (names.hasMoreElements()) {
        String name = (String) names.nextElement();
        copied.setObject(name, map.getObject(name));
      }
      copy = copied;
    } else {
      return null;
    }
    Enumeration<?> names = message.getPropertyNames();
    while (names.hasMoreElements()) {
      String name = (String) names.nextElement();
      if (!name.startsWith("JMSX") && !name.startsWith("_") && !name.equals(DEFERRALS)) {
        copy.setObjectProperty(name, message.getObjectProperty(name));
      }
    }
    copy.setJMSCorrelationID(message.getJMSCorrelationID());
    copy.setJMSType(message.getJMSType());
    copy.setJMSReplyTo(message.getJMSReplyTo());
    return copy;
  }
}
