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
 * probe47's finding (issue 37, fixjms45's {@code JmsSessionCommit}; SPEC 15, "an outcome is
 * recorded only for a delivery whose transaction committed"): a session commit that the broker
 * refuses with an error that is not a rollback verdict (a plain {@code JMSException}: a server-side
 * failure of the commit, which drops the transaction) while the container's shutdown interrupt
 * lands on the thread during it. docs/message-consumers.md: "A commit the broker refuses while
 * nothing interrupted it still releases the key"; the interrupt here did not cause the failure, but
 * {@code JmsSessionCommit} counted any interrupt pending after a failed try as "a failure that an
 * interrupt alone caused" and tried again: the retry committed the new, empty transaction (failed
 * before the fix on Boot 3.5 and 4.0). Now only an interrupt in the failure's causes counts.
 *
 * <p>Real embedded Artemis, {@link JmsTransactionTest}'s application and listener (it sends through
 * {@link Sends}, then sends the event on in its transacted session). The rollback is Artemis's own;
 * {@link FailingSessionCommits} only sets the interrupt and throws the refusal. The promise probed:
 * the key is released and the redelivery runs the listener again, so what it sends on in its
 * session is committed once; never a replay of a delivery whose transaction did not commit.
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
class JmsCommitRefusedWhileInterruptedTest {

  @Autowired Sends sends;
  @Autowired Events events;
  @Autowired FailingSessionCommits commits;
  @Autowired JmsTemplate template;

  @Test
  void aCommitTheBrokerRefusedIsDoneAgainOnRedeliveryThoughAnInterruptLandedInIt()
      throws Exception {
    String event = "commit-refused-" + UUID.randomUUID().toString().substring(0, 8);
    commits.refuseNextCommitWhileInterruptedOf(event);
    template.convertAndSend("idem.tx", event);

    await("the listener's first send", () -> sends.of(event).size() >= 1);
    await(
        "the redelivery of the refused message, replayed or run again and recorded",
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
        .as("the redelivery of a delivery whose commit the broker refused is not a replay")
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
