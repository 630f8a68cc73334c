package dev.idempotency.spring.suite;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.spring.messaging.Events;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import jakarta.jms.JMSException;
import jakarta.jms.Message;
import jakarta.jms.TextMessage;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.jms.core.JmsTemplate;

/**
 * A {@link SuiteJmsApplication} with its embedded Artemis broker (Boot gives each application's
 * embedded broker a server id of its own, so it never meets another application's in-VM broker):
 * published to with its {@code JmsTemplate}, acknowledged once its queue is empty, its dead letters
 * drained from {@code DLQ}.
 */
final class JmsListenerApplication implements ListenerApplication {

  private final ConfigurableApplicationContext context;
  private final String queue;
  private final List<String> deadLetters = new CopyOnWriteArrayList<>();

  private JmsListenerApplication(ConfigurableApplicationContext context, String queue) {
    this.context = context;
    this.queue = queue;
  }

  static JmsListenerApplication start(
      SwitchableKeyStore store, SuiteProvider provider, CountDownLatch closing, String queue) {
    return start(store, provider, closing, queue, new String[0]);
  }

  /** The application with {@code extraProperties} set as well (probes). */
  static JmsListenerApplication start(
      SwitchableKeyStore store,
      SuiteProvider provider,
      CountDownLatch closing,
      String queue,
      String... extraProperties) {
    return start(store, provider, closing, queue, new Class<?>[0], extraProperties);
  }

  /** The application with {@code sources} added and {@code extraProperties} set (probes). */
  static JmsListenerApplication start(
      SwitchableKeyStore store,
      SuiteProvider provider,
      CountDownLatch closing,
      String queue,
      Class<?>[] sources,
      String... extraProperties) {
    // as arguments: the test resources' application.properties turns the embedded broker off
    ConfigurableApplicationContext context =
        SuiteApplications.application(SuiteJmsApplication.class, store, provider, closing)
            .sources(sources)
            .arguments(
                SuiteApplications.listenerProperties(
                    new String[] {
                      "spring.artemis.mode=embedded",
                      "spring.artemis.embedded.enabled=true",
                      "spring.artemis.embedded.queues=" + queue,
                      "suite.destination=" + queue
                    },
                    extraProperties))
            .run();
    return new JmsListenerApplication(context, queue);
  }

  @Override
  public void publish(String key, String payload) {
    template()
        .convertAndSend(
            queue,
            payload,
            message -> {
              message.setStringProperty("Idempotency_Key", key);
              return message;
            });
  }

  /** Drains {@code DLQ} into what this application has seen of it. */
  @Override
  public synchronized List<String> deadLettered() {
    JmsTemplate template = new JmsTemplate(template().getConnectionFactory());
    template.setReceiveTimeout(JmsTemplate.RECEIVE_TIMEOUT_NO_WAIT);
    try {
      Message message;
      while ((message = template.receive("DLQ")) != null) {
        deadLetters.add(((TextMessage) message).getText());
      }
    } catch (JMSException e) {
      throw new IllegalStateException(e);
    }
    return Collections.unmodifiableList(new ArrayList<>(deadLetters));
  }

  /** Nothing is left in the queue, delivered or not. */
  @Override
  public void awaitAcknowledged() throws Exception {
    Waits.await(
        "an empty queue",
        () ->
            template()
                    .browse(queue, (session, browser) -> browser.getEnumeration().hasMoreElements())
                == Boolean.FALSE);
  }

  private JmsTemplate template() {
    return context.getBean(JmsTemplate.class);
  }

  /** The container's own failures after a listener returned, as its error handler saw them. */
  @Override
  public List<String> consumerFailures() {
    return context.getBean(ConsumerFailures.class).seen();
  }

  @Override
  public Events events() {
    return context.getBean(Events.class);
  }

  @Override
  public IdempotencyGuard guard() {
    return context.getBean(IdempotencyGuard.class);
  }

  /** The application's context (probes). */
  ConfigurableApplicationContext context() {
    return context;
  }

  @Override
  public void close() {
    context.close();
  }
}
