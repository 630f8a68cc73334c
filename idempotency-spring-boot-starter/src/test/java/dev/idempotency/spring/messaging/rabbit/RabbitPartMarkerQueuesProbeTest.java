package dev.idempotency.spring.messaging.rabbit;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.core.Declarables;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.rabbit.annotation.RabbitListener;
import org.springframework.amqp.rabbit.config.DirectRabbitListenerContainerFactory;
import org.springframework.amqp.rabbit.connection.ConnectionFactory;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.test.annotation.DirtiesContext;

/**
 * probeP, on a real RabbitMQ broker: attempts to break SPEC 1 on 859e2ff2, the producer-batch part
 * marker's bound value naming the consumer queue ({@code getConsumerQueue()}) as well as the
 * consumer and delivery tags. A container that consumes several queues reports, per delivery, the
 * queue of that delivery's consumer: if the queue the part was marked with and the one the advice
 * reads differed, a later part would not be recognised, and a header-keyed listener would take it
 * with the first message's key: acknowledged as the first's replay, unsent (a lost send). Each
 * case: a producer's batch of two (each its own Idempotency-Key) to the second queue of a
 * header-keyed listener's container on two queues; the first is sent once, the second never, and
 * the batch is rejected without requeue (dead-lettered), as for a container of one queue
 * (RabbitProducerBatchHeaderKeyProbeTest). Held on Boot 3.5 and 4.0 (probeP, on 7efd6b9a), for
 * Boot's simple container and a direct one. The probe can fail: with isMarked comparing against a
 * value that never matches (a mutant, not committed), all three failed on Boot 3.5 (nothing
 * dead-lettered: the second part acknowledged as the first's replay).
 */
@SpringBootTest(
    classes = RabbitPartMarkerQueuesProbeTest.App.class,
    properties = "logging.level.org.springframework.amqp.rabbit.listener=OFF")
@DirtiesContext
class RabbitPartMarkerQueuesProbeTest extends RabbitProbeSupport {

  static final String SIMPLE_FIRST = "idem.part-marker-queues-probe.simple-first";
  static final String SIMPLE_SECOND = "idem.part-marker-queues-probe.simple-second";
  static final String DIRECT_FIRST = "idem.part-marker-queues-probe.direct-first";
  static final String DIRECT_SECOND = "idem.part-marker-queues-probe.direct-second";

  static final List<String> sent = new CopyOnWriteArrayList<>();

  public static class Listeners {
    /** Keyed by its default header, in Boot's (simple) container, on two queues. */
    @RabbitListener(
        id = "part-marker-queues-probe-simple",
        queues = {SIMPLE_FIRST, SIMPLE_SECOND})
    @IdempotentListener(name = "part-marker-queues-probe-simple")
    public void simple(String event) {
      sent.add(event);
    }

    /** Keyed by its default header, in a direct container, on two queues. */
    @RabbitListener(
        id = "part-marker-queues-probe-direct",
        queues = {DIRECT_FIRST, DIRECT_SECOND},
        containerFactory = "partMarkerQueuesProbeDirectFactory")
    @IdempotentListener(name = "part-marker-queues-probe-direct")
    public void direct(String event) {
      sent.add(event);
    }
  }

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ListenerTestConfiguration.class)
  static class App {
    @Bean
    Listeners partMarkerQueuesProbeListeners() {
      return new Listeners();
    }

    @Bean
    Declarables partMarkerQueuesProbeQueues() {
      return deadLetteredQueues(SIMPLE_FIRST, SIMPLE_SECOND, DIRECT_FIRST, DIRECT_SECOND);
    }

    /** A direct container (a consumer per queue, on the broker's threads). */
    @Bean
    DirectRabbitListenerContainerFactory partMarkerQueuesProbeDirectFactory(
        ConnectionFactory connectionFactory) {
      DirectRabbitListenerContainerFactory factory = new DirectRabbitListenerContainerFactory();
      factory.setConnectionFactory(connectionFactory);
      return factory;
    }
  }

  @Override
  List<String> sends() {
    return sent;
  }

  /** Boot's simple container, the batch to its second queue. */
  @Test
  void aProducerBatchToTheSecondQueueOfASimpleContainerIsRecognised() throws Exception {
    sentThenDeadLettered(SIMPLE_SECOND, "ps");
  }

  /** A direct container, the batch to its second queue. */
  @Test
  void aProducerBatchToTheSecondQueueOfADirectContainerIsRecognised() throws Exception {
    sentThenDeadLettered(DIRECT_SECOND, "pd");
  }

  /** The same batch to the first queue of the direct container, after the second's. */
  @Test
  void aProducerBatchToTheFirstQueueOfADirectContainerIsRecognised() throws Exception {
    sentThenDeadLettered(DIRECT_FIRST, "pf");
  }

  private void sentThenDeadLettered(String queue, String prefix) throws Exception {
    String first = unique(prefix + "-first");
    String second = unique(prefix + "-second");
    publishBatch(queue, messages(List.of(first, second)));
    Message deadLetter = plain.receive(queue + DEAD_LETTERS, 45_000);
    assertThat(deadLetter)
        .as("the producer's batch, dead-lettered (else its second part was acked as a replay)")
        .isNotNull();
    // the batch's delivery is over once a message published behind it on its own has been sent
    awaitMarker(queue, prefix);

    assertThat(new int[] {sent(first), sent(second)})
        .as("sends of first, second (one producer batch to %s, each its own key)", queue)
        .containsExactly(1, 0);
  }
}
