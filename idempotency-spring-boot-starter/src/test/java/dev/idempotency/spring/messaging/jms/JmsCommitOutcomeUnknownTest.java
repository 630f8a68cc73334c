package dev.idempotency.spring.messaging.jms;

import static dev.idempotency.spring.messaging.Polling.await;
import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.spring.messaging.Events;
import dev.idempotency.spring.messaging.Sends;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.jms.core.JmsTemplate;
import org.springframework.test.annotation.DirtiesContext;

/**
 * Issue 37 (found by probe45a) on {@code JmsSessionCommit}'s fate-unknown path: the session commit
 * reaches the broker and commits there, then fails on the client because the connection fails while
 * the blocking commit waits for the answer (Artemis: {@code AMQ219016 ... Unblocking a blocking
 * call that will never get a response}, an {@code ActiveMQUnBlockedException}); nothing interrupted
 * the thread. The listener's provider send happened and the broker consumed the message, so SPEC 1:
 * a republished copy of the event (a producer's retry, what SPEC 15 is for) is a replay, never a
 * second send.
 *
 * <p>Real embedded Artemis, {@link JmsTransactionTest}'s application and listener (it sends through
 * {@link Sends}, then sends the event on in its transacted session). The commit is Artemis's own
 * and really commits; {@link FailingSessionCommits} only throws the connection failure after it, as
 * the client throws it when the answer never comes. The starter records the outcome, never
 * releases, and says so in one WARN that does not name the key.
 */
@ExtendWith(OutputCaptureExtension.class)
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
class JmsCommitOutcomeUnknownTest {

  private static final String WARNING = "The fate of the session commit of JMS listener";

  @Autowired Sends sends;
  @Autowired Events events;
  @Autowired FailingSessionCommits commits;
  @Autowired JmsTemplate template;

  @Test
  void aCommitThatReachedTheBrokerThenLostItsAnswerIsNotSentAgainForARepublishedCopy(
      CapturedOutput output) throws Exception {
    int logFrom = output.getAll().length();
    String event = "commit-answer-lost-" + UUID.randomUUID().toString().substring(0, 8);
    commits.loseAnswerOfNextCommitOf(event);
    template.convertAndSend("idem.tx", event);

    await("the listener's send", () -> sends.of(event).size() == 1);
    await("the message it sent on, committed by the broker", () -> sentOn().contains(event));
    await(
        "the starter's decision on the outcome (recorded or released)",
        () ->
            events.count(Type.COMPLETED, JmsTransactionTest.RECORD, event)
                    + events.count(Type.RELEASED, JmsTransactionTest.RECORD, event)
                > 0);
    assertThat(queueIsEmpty("idem.tx"))
        .as("the broker committed the delivery: nothing is left to redeliver")
        .isTrue();

    // the producer publishes the event again (its retry of an unanswered publish)
    long replays = events.count(Type.REPLAYED, JmsTransactionTest.RECORD, event);
    template.convertAndSend("idem.tx", event);
    await(
        "the republished copy, run or replayed",
        () ->
            sends.runs(event) >= 2
                || events.count(Type.REPLAYED, JmsTransactionTest.RECORD, event) > replays);

    assertThat(sends.of(event)).as("provider sends of the event").hasSize(1);
    assertThat(sentOn()).as("messages the listener sent on, committed").containsOnlyOnce(event);
    assertThat(events.count(Type.RELEASED, JmsTransactionTest.RECORD, event))
        .as("releases of the key of a send that happened, in a delivery the broker committed")
        .isZero();
    List<String> warnings =
        output.getAll().substring(logFrom).lines().filter(line -> line.contains(WARNING)).toList();
    assertThat(warnings).as("WARN lines naming the unknown fate").hasSize(1);
    assertThat(warnings.get(0)).contains("WARN").doesNotContain(event);
  }

  private boolean queueIsEmpty(String queue) {
    return QueueBrowsing.isEmpty(template, queue);
  }

  /** The committed messages the listener sent on, browsed. */
  private List<String> sentOn() {
    return QueueBrowsing.texts(template, JmsTransactionTest.OUTPUT);
  }
}
