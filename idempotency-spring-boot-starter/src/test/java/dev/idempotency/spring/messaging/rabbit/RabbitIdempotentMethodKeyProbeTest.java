package dev.idempotency.spring.messaging.rabbit;

import dev.idempotency.spring.Idempotent;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.assertj.core.api.SoftAssertions;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.core.Declarables;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.rabbit.annotation.RabbitListener;
import org.springframework.amqp.rabbit.config.SimpleRabbitListenerContainerFactory;
import org.springframework.amqp.rabbit.connection.ConnectionFactory;
import org.springframework.amqp.rabbit.listener.RabbitListenerEndpointRegistry;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.test.annotation.DirtiesContext;

/**
 * Probe (probeS), on the real rabbitmq-server: {@code @Idempotent} (not
 * {@code @IdempotentListener}) on a {@code @RabbitListener} method, keyed by {@code
 * #p0.split('\|')[1]}, given a message without {@code |}: SpEL cannot work out its key (index out
 * of bounds). The promise (SPEC 1, 15): the message is not sent; and, as for
 * {@code @IdempotentListener}, it is dead-lettered rather than requeued in a loop.
 */
@SpringBootTest(
    classes = RabbitIdempotentMethodKeyProbeTest.App.class,
    properties = "logging.level.org.springframework.amqp.rabbit.listener=OFF")
@DirtiesContext
class RabbitIdempotentMethodKeyProbeTest extends RabbitProbeSupport {

  static final String QUEUE = "idem.probe-s.idempotent-method-key";
  static final String LISTENER = "probe-s-idempotent-method-key";
  static final AtomicInteger RECEIVED = new AtomicInteger();

  public static class Listeners {
    static final List<String> sent = new CopyOnWriteArrayList<>();

    @RabbitListener(id = LISTENER, queues = QUEUE, containerFactory = "countingFactory")
    @Idempotent(name = LISTENER, key = "#p0.split('\\|')[1]")
    public void record(String event) {
      sent.add(event);
    }
  }

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ListenerTestConfiguration.class)
  static class App {
    @Bean
    Listeners probeSMethodListeners() {
      return new Listeners();
    }

    @Bean
    Declarables probeSMethodQueues() {
      return deadLetteredQueues(QUEUE);
    }

    @Bean
    SimpleRabbitListenerContainerFactory countingFactory(ConnectionFactory connectionFactory) {
      SimpleRabbitListenerContainerFactory factory = new SimpleRabbitListenerContainerFactory();
      factory.setConnectionFactory(connectionFactory);
      factory.setReceiveTimeout(100L);
      factory.setAfterReceivePostProcessors(
          message -> {
            RECEIVED.incrementAndGet();
            return message;
          });
      return factory;
    }
  }

  @Autowired RabbitListenerEndpointRegistry registry;

  @Override
  List<String> sends() {
    return Listeners.sent;
  }

  /*
   * Was an open finding, fixed by fixmethodkey (an @Idempotent key that SpEL cannot evaluate for
   * the arguments is an InvalidKeyException, which RabbitDeliveryAdvice rejects without requeue and
   * Kafka's error handler does not retry). It read: (probeS, on 8e1366f; medium: no progress, a hot requeue loop, the queue's later
   * messages behind it; not a second or lost send). IdempotentMethod.keyValue lets SpEL's
   * EvaluationException out as it is, which RabbitDeliveryAdvice passes on as the listener's own
   * failure, and Spring AMQP requeues it (default-requeue-rejected): "[the message, dead-lettered
   * (deliveries: 39)] Expecting actual not to be null" on Boot 3.5 (34 on Boot 4.0), within
   * seconds. The fix belongs with @Idempotent's key (dev.idempotency.spring), outside the messaging
   * package.
   */
  @Test
  void aKeyThatCannotBeEvaluatedIsDeadLetteredNotRequeuedInALoop() throws Exception {
    String event = unique("no-bar");
    int before = RECEIVED.get();
    plain.send("", QUEUE, message(event));
    try {
      await(
          "the message dead-lettered, or 30 deliveries (a loop)",
          () -> deadLetterCount() > 0 || RECEIVED.get() - before >= 30);
    } catch (AssertionError timedOut) {
      // the assertions say what happened
    }
    int deliveries = RECEIVED.get() - before;
    Message deadLetter = plain.receive(QUEUE + DEAD_LETTERS, 1_000);
    if (deadLetter == null) {
      registry.getListenerContainer(LISTENER).stop(); // end a loop
    }
    SoftAssertions.assertSoftly(
        softly -> {
          softly.assertThat(sent(event)).as("sends").isZero();
          softly
              .assertThat(deadLetter)
              .as("the message, dead-lettered (deliveries: " + deliveries + ")")
              .isNotNull();
        });
  }

  private long deadLetterCount() {
    Long count = plain.execute(channel -> channel.messageCount(QUEUE + DEAD_LETTERS));
    return count == null ? 0 : count;
  }
}
