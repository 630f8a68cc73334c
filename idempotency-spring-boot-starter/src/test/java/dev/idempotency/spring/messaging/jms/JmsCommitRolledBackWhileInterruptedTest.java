package dev.idempotency.spring.messaging.jms;

import static dev.idempotency.spring.messaging.Polling.await;
import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.spring.messaging.Events;
import dev.idempotency.spring.messaging.Sends;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.jms.core.JmsTemplate;
import org.springframework.test.annotation.DirtiesContext;

/**
 * Issue 37 (found by probe45a) on {@code JmsSessionCommit}: a session commit that the broker rolls
 * back (a {@code TransactionRolledBackException}; Artemis rolled the session back, so it
 * redelivers) while the container's shutdown interrupt lands on the thread during it.
 * docs/message-consumers.md: "if the transaction rolls back, or its commit fails, the key is
 * released, so the broker's redelivery runs the listener again and its transactional work is done
 * again (a redelivery acknowledged as a replay would have lost it for good)"; only a commit that an
 * interrupt failed "after it wrote the commit to the broker" is recorded instead.
 *
 * <p>Real embedded Artemis, {@link JmsTransactionTest}'s application and listener (it sends through
 * {@link Sends}, then sends the event on in its transacted session). The rollback is Artemis's own;
 * {@link FailingSessionCommits} only sets the interrupt and throws the refusal. The broker's
 * verdict wins over the interrupt: the key is released and the commit is not tried again (a retry
 * would commit an empty transaction).
 */
@SpringBootTest(
    classes = JmsTransactionTest.App.class,
    properties = {
      "spring.artemis.mode=embedded",
      "spring.artemis.embedded.enabled=true",
      "spring.artemis.embedded.queues=idem.tx,idem.tx.out",
      "idempotency.in-flight-wait=50ms",
      "idempotency.messaging.back-off.initial=50ms",
      "idempotency.messaging.back-off.max=300ms",
      "spring.main.banner-mode=off"
    })
@DirtiesContext
class JmsCommitRolledBackWhileInterruptedTest {

  @Autowired Sends sends;
  @Autowired Events events;
  @Autowired FailingSessionCommits commits;
  @Autowired JmsTemplate template;

  @Test
  void aCommitTheBrokerRolledBackIsDoneAgainOnRedeliveryThoughAnInterruptLandedInIt()
      throws Exception {
    String event = "commit-rolled-back-" + UUID.randomUUID().toString().substring(0, 8);
    commits.rollBackNextCommitWhileInterruptedOf(event);
    template.convertAndSend("idem.tx", event);

    await("the listener's first send", () -> sends.of(event).size() >= 1);
    await(
        "the redelivery of the rolled-back message, replayed or run again and recorded",
        () ->
            events.count(Type.REPLAYED, JmsTransactionTest.RECORD, event) > 0
                || (sends.runs(event) >= 2
                    && events.count(Type.COMPLETED, JmsTransactionTest.RECORD, event) == 1));
    await("the queue drained", () -> queueIsEmpty("idem.tx"));

    assertThat(sentOn())
        .as(
            "the message the listener sent on in its session, committed once (listener runs %d,"
                + " replays %d, releases %d)",
            sends.runs(event),
            events.count(Type.REPLAYED, JmsTransactionTest.RECORD, event),
            events.count(Type.RELEASED, JmsTransactionTest.RECORD, event))
        .containsOnlyOnce(event);
    assertThat(events.count(Type.REPLAYED, JmsTransactionTest.RECORD, event))
        .as("the redelivery of a delivery whose session rolled back is not a replay")
        .isZero();
  }

  private boolean queueIsEmpty(String queue) {
    return QueueBrowsing.isEmpty(template, queue);
  }

  /** The committed messages the listener sent on, browsed. */
  private List<String> sentOn() {
    return QueueBrowsing.texts(template, JmsTransactionTest.OUTPUT);
  }
}
