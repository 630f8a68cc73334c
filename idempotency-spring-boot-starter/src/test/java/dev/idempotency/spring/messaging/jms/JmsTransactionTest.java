package dev.idempotency.spring.messaging.jms;

import static dev.idempotency.spring.messaging.Polling.await;
import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spring.messaging.Events;
import dev.idempotency.spring.messaging.IdempotentDelivery;
import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.JmsCommitRetries;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import dev.idempotency.spring.messaging.Sends;
import jakarta.jms.JMSException;
import jakarta.jms.MessageProducer;
import jakarta.jms.Session;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.jms.annotation.JmsListener;
import org.springframework.jms.connection.SingleConnectionFactory;
import org.springframework.jms.core.JmsTemplate;
import org.springframework.test.annotation.DirtiesContext;

/**
 * Issue 37, item 7, on a real ActiveMQ Artemis broker: Spring Boot's listener containers have
 * transacted sessions and no transaction manager, so the container commits the session after the
 * listener returned (the message's acknowledgement and what the listener sent in the session), with
 * no Spring synchronization. An outcome is recorded only once that commit succeeded; a commit that
 * fails rolls the session back, the broker redelivers, and the listener must run again, or what it
 * sent in the session would be lost for good.
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
@ExtendWith(OutputCaptureExtension.class)
class JmsTransactionTest {

  static final String RECORD = "jms-tx-record";
  static final String OUTPUT = "idem.tx.out";
  private static final String FATE_UNKNOWN = "The fate of the session commit of JMS listener";

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ListenerTestConfiguration.class)
  static class App {
    @Bean
    static FailingSessionCommits failingSessionCommits() {
      return new FailingSessionCommits();
    }

    @Bean
    Listener jmsTransactionListener(Sends sends, FailingSessionCommits commits) {
      return new Listener(sends, commits);
    }
  }

  /** Sends through {@link Sends}, then sends the event on in its session (its transacted work). */
  public static class Listener {
    private final Sends sends;
    private final FailingSessionCommits commits;

    Listener(Sends sends, FailingSessionCommits commits) {
      this.sends = sends;
      this.commits = commits;
    }

    @JmsListener(id = RECORD, destination = "idem.tx")
    @IdempotentListener(name = RECORD, key = "#event")
    public void record(String event, Session session) throws JMSException {
      sends.send(RECORD, event, IdempotentDelivery.context());
      try (MessageProducer producer = session.createProducer(session.createQueue(OUTPUT))) {
        producer.send(session.createTextMessage(event));
      }
      commits.running(event);
    }
  }

  @Autowired Sends sends;
  @Autowired Events events;
  @Autowired IdempotencyGuard guard;
  @Autowired FailingSessionCommits commits;
  @Autowired JmsTemplate template;

  private static String unique(String what) {
    return what + "-" + UUID.randomUUID().toString().substring(0, 8);
  }

  @Test
  void aDeliveryWhoseSessionFailedToCommitRunsAgainWhenTheBrokerRedeliversIt() throws Exception {
    String event = unique("commit-fails");
    commits.failNextCommitOf(event);
    template.convertAndSend("idem.tx", event);

    await(
        "the redelivery after the failed commit, run or replayed",
        () -> sends.runs(event) >= 2 || events.count(Type.REPLAYED, RECORD, event) > 0);
    assertThat(events.count(Type.REPLAYED, RECORD, event))
        .as("the redelivery of a delivery whose session rolled back is not a replay")
        .isZero();
    assertThat(sends.runs(event)).as("the listener ran again for the redelivery").isEqualTo(2);
    assertRecorded(event);
    assertThat(events.count(Type.RELEASED, RECORD, event))
        .as("the rolled-back delivery released its key")
        .isEqualTo(1);
    await("the message it sent, committed", () -> sentOn().contains(event));
    assertThat(sentOn()).containsOnlyOnce(event);
  }

  @Test
  void aDeliveryWhoseCommitAnInterruptFailedIsRecordedNotReleased() throws Exception {
    String event = unique("commit-interrupted");
    commits.interruptNextCommitOf(event);
    template.convertAndSend("idem.tx", event);

    assertRecordedNotReleased(event);
    await("the message it sent, committed", () -> sentOn().contains(event));
    long replays = events.count(Type.REPLAYED, RECORD, event);
    template.convertAndSend("idem.tx", event);
    await("the repeat replayed", () -> events.count(Type.REPLAYED, RECORD, event) > replays);
    assertThat(sends.runs(event)).as("the listener ran for the first delivery only").isEqualTo(1);
    assertThat(sentOn()).containsOnlyOnce(event);
  }

  /**
   * The fate-unknown path of {@code JmsSessionCommit} (docs/message-consumers.md): interrupts keep
   * failing the commit for the whole retry window (shortened to 400 ms here; 5 s in production).
   * The outcome is recorded all the same, never released, with one WARN that names the listener
   * class and the destination but not the key, and the commit was tried again after a pause each
   * time rather than in a busy loop (before the pause: 3,091 tries in the 400 ms of one run).
   */
  @Test
  void aDeliveryWhoseCommitInterruptsKeepFailingIsRecordedWithAWarning(CapturedOutput output)
      throws Exception {
    String event = unique("commit-fate-unknown");
    Duration window = Duration.ofMillis(400);
    try (JmsCommitRetries.Restore shortened = JmsCommitRetries.shortenedTo(window)) {
      commits.interruptEveryCommitOf(event);
      template.convertAndSend("idem.tx", event);
      assertRecordedNotReleased(event);
    }
    assertThat(commits.commitTries(event))
        .as("the commit was tried again, pausing between tries")
        .isBetween(2, (int) (window.toMillis() / JmsCommitRetries.pause().toMillis()) + 2);
    await(
        "the warning",
        () -> output.getOut().contains("kept failing for " + window + " while the container"));
    assertThat(output.getOut().lines().filter(line -> line.contains("kept failing for")))
        .singleElement()
        .satisfies(
            line ->
                assertThat(line)
                    .contains("WARN")
                    .contains("idem.tx")
                    .doesNotContain(event)
                    .doesNotContain(IdempotencyKey.of(RECORD, event)));
    await("the message it sent, committed", () -> sentOn().contains(event));
    assertThat(sends.runs(event)).as("the listener ran once").isEqualTo(1);
  }

  @Test
  void aDeliveryWhoseSessionCommittedIsRecordedAndARepeatIsAReplay() throws Exception {
    String event = unique("commits");
    template.convertAndSend("idem.tx", event);

    assertRecorded(event);
    await("the message it sent, committed", () -> sentOn().contains(event));
    long replays = events.count(Type.REPLAYED, RECORD, event);
    template.convertAndSend("idem.tx", event);
    await("the repeat replayed", () -> events.count(Type.REPLAYED, RECORD, event) > replays);
    assertThat(sends.runs(event)).as("the listener ran for the first delivery only").isEqualTo(1);
    assertThat(sentOn()).containsOnlyOnce(event);
  }

  /**
   * Issue 37 (found by probe45a) on {@code JmsSessionCommit}'s fate-unknown path: the session
   * commit reaches the broker and commits there, then fails on the client because the connection
   * fails while the blocking commit waits for the answer (Artemis: {@code AMQ219016 ... Unblocking
   * a blocking call that will never get a response}, an {@code ActiveMQUnBlockedException});
   * nothing interrupted the thread. The listener's provider send happened and the broker consumed
   * the message, so SPEC 1: a republished copy of the event (a producer's retry, what SPEC 15 is
   * for) is a replay, never a second send.
   *
   * <p>The commit is Artemis's own and really commits; {@link FailingSessionCommits} only throws
   * the connection failure after it, as the client throws it when the answer never comes. The
   * starter records the outcome, never releases, and says so in one WARN that does not name the
   * key. (Formerly {@code JmsCommitOutcomeUnknownTest}.)
   */
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
            events.count(Type.COMPLETED, RECORD, event) + events.count(Type.RELEASED, RECORD, event)
                > 0);
    assertThat(queueIsEmpty("idem.tx"))
        .as("the broker committed the delivery: nothing is left to redeliver")
        .isTrue();

    // the producer publishes the event again (its retry of an unanswered publish)
    long replays = events.count(Type.REPLAYED, RECORD, event);
    republish(event);
    await(
        "the republished copy, run or replayed",
        () -> sends.runs(event) >= 2 || events.count(Type.REPLAYED, RECORD, event) > replays);

    assertThat(sends.of(event)).as("provider sends of the event").hasSize(1);
    assertThat(sentOn()).as("messages the listener sent on, committed").containsOnlyOnce(event);
    assertThat(events.count(Type.RELEASED, RECORD, event))
        .as("releases of the key of a send that happened, in a delivery the broker committed")
        .isZero();
    List<String> warnings =
        output
            .getAll()
            .substring(logFrom)
            .lines()
            .filter(line -> line.contains(FATE_UNKNOWN))
            .toList();
    assertThat(warnings).as("WARN lines naming the unknown fate").hasSize(1);
    assertThat(warnings.get(0)).contains("WARN").doesNotContain(event);
  }

  /**
   * Issue 37 (found by probe45a) on {@code JmsSessionCommit}: a session commit that the broker
   * rolls back (a {@code TransactionRolledBackException}; Artemis rolled the session back, so it
   * redelivers) while the container's shutdown interrupt lands on the thread during it.
   * docs/message-consumers.md: "if the transaction rolls back, or its commit fails, the key is
   * released, so the broker's redelivery runs the listener again and its transactional work is done
   * again (a redelivery acknowledged as a replay would have lost it for good)"; only a commit that
   * an interrupt failed "after it wrote the commit to the broker" is recorded instead.
   *
   * <p>The rollback is Artemis's own; {@link FailingSessionCommits} only sets the interrupt and
   * throws the refusal. The broker's verdict wins over the interrupt: the key is released and the
   * commit is not tried again (a retry would commit an empty transaction). (Formerly {@code
   * JmsCommitRolledBackWhileInterruptedTest}.)
   */
  @Test
  void aCommitTheBrokerRolledBackIsDoneAgainOnRedeliveryThoughAnInterruptLandedInIt()
      throws Exception {
    String event = "commit-rolled-back-" + UUID.randomUUID().toString().substring(0, 8);
    commits.rollBackNextCommitWhileInterruptedOf(event);
    assertRedeliveryRunAgainAndSentOnOnce(
        event, "the rolled-back message", "a delivery whose session rolled back");
  }

  /**
   * probe47's finding (issue 37, fixjms45's {@code JmsSessionCommit}; SPEC 15, "an outcome is
   * recorded only for a delivery whose transaction committed"): a session commit that the broker
   * refuses with an error that is not a rollback verdict (a plain {@code JMSException}: a
   * server-side failure of the commit, which drops the transaction) while the container's shutdown
   * interrupt lands on the thread during it. docs/message-consumers.md: "A commit the broker
   * refuses while nothing interrupted it still releases the key"; the interrupt here did not cause
   * the failure, but {@code JmsSessionCommit} counted any interrupt pending after a failed try as
   * "a failure that an interrupt alone caused" and tried again: the retry committed the new, empty
   * transaction (failed before the fix on Boot 3.5 and 4.0). Now only an interrupt in the failure's
   * causes counts.
   *
   * <p>The rollback is Artemis's own; {@link FailingSessionCommits} only sets the interrupt and
   * throws the refusal. The promise probed: the key is released and the redelivery runs the
   * listener again, so what it sends on in its session is committed once; never a replay of a
   * delivery whose transaction did not commit. (Formerly {@code
   * JmsCommitRefusedWhileInterruptedTest}.)
   */
  @Test
  void aCommitTheBrokerRefusedIsDoneAgainOnRedeliveryThoughAnInterruptLandedInIt()
      throws Exception {
    String event = "commit-refused-" + UUID.randomUUID().toString().substring(0, 8);
    commits.refuseNextCommitWhileInterruptedOf(event);
    assertRedeliveryRunAgainAndSentOnOnce(
        event, "the refused message", "a delivery whose commit the broker refused");
  }

  /**
   * The product gap behind {@code JmsShutdownInterruptTest} on Spring Boot 4.0: Spring's listener
   * container (Spring Framework 6.2.18 and 7.0.7 on) gives up waiting for a delivery at shutdown
   * and closes its session under it, so the starter's commit after the listener's send fails with
   * Artemis's "Session is closed"; a failed connection does the same. The commit never reached the
   * broker, which delivers the message again. The starter took that for a refusal and released the
   * key, so the redelivery sent again at once (failed before the fix: the listener ran twice, one
   * release). SPEC 15 (an outcome is recorded only for a delivery whose transaction committed) and
   * SPEC 1/14 (never a release of a key whose send happened; one more send only after the lease, as
   * after a crash): the key is left claimed, the redelivery is deferred while the lease holds.
   */
  @Test
  void aDeliveryWhoseSessionWasClosedBeforeItsCommitLeavesItsKeyClaimed(CapturedOutput output)
      throws Exception {
    int logFrom = output.getAll().length();
    String event = unique("session-closed");
    commits.closeSessionBeforeNextCommitOf(event);
    template.convertAndSend("idem.tx", event);

    await("the listener's send", () -> sends.of(event).size() >= 1);
    await(
        "the redelivery, deferred (the key in flight) or run again",
        () -> events.count(Type.IN_PROGRESS_CONFLICT, RECORD, event) > 0 || sends.runs(event) >= 2);
    assertThat(sends.runs(event))
        .as("the listener ran once: the redelivery within the lease did not send again")
        .isEqualTo(1);
    assertThat(events.count(Type.RELEASED, RECORD, event))
        .as("releases of the key of a send that happened, in a delivery that did not commit")
        .isZero();
    assertThat(events.count(Type.COMPLETED, RECORD, event))
        .as("outcomes recorded for a delivery whose transaction did not commit")
        .isZero();
    assertThat(guard.find(IdempotencyKey.of(RECORD, event)))
        .as("the key stays claimed until its lease runs out")
        .hasValueSatisfying(
            record -> assertThat(record.state()).isEqualTo(RecordState.IN_PROGRESS));
    assertThat(sentOn()).as("what the listener sent on, rolled back").doesNotContain(event);
    List<String> warnings =
        output
            .getAll()
            .substring(logFrom)
            .lines()
            .filter(line -> line.contains("was closed before its commit"))
            .toList();
    assertThat(warnings).as("WARN lines naming the closed session").hasSize(1);
    assertThat(warnings.get(0)).contains("WARN").contains("idem.tx").doesNotContain(event);
  }

  /**
   * Publishes {@code event}, whose next commit a test set to fail, and proves that the redelivery
   * of {@code message} (named in the wait) is run again, not replayed, so that what the listener
   * sent on in its session is committed once; {@code delivery} names the failed delivery.
   */
  private void assertRedeliveryRunAgainAndSentOnOnce(String event, String message, String delivery)
      throws Exception {
    template.convertAndSend("idem.tx", event);

    await("the listener's first send", () -> sends.of(event).size() >= 1);
    await(
        "the redelivery of " + message + ", replayed or run again and recorded",
        () ->
            events.count(Type.REPLAYED, RECORD, event) > 0
                || (sends.runs(event) >= 2 && events.count(Type.COMPLETED, RECORD, event) == 1));
    await("the queue drained", () -> queueIsEmpty("idem.tx"));

    assertThat(sentOn())
        .as(
            "the message the listener sent on in its session, committed once (listener runs %d,"
                + " replays %d, releases %d)",
            sends.runs(event),
            events.count(Type.REPLAYED, RECORD, event),
            events.count(Type.RELEASED, RECORD, event))
        .containsOnlyOnce(event);
    assertThat(events.count(Type.REPLAYED, RECORD, event))
        .as("the redelivery of " + delivery + " is not a replay")
        .isZero();
  }

  /** {@link #assertRecorded}, and the key was never released: its send happened. */
  private void assertRecordedNotReleased(String event) throws Exception {
    assertRecorded(event);
    assertThat(events.count(Type.RELEASED, RECORD, event))
        .as("a commit failed by interrupts never releases the key of a send that happened")
        .isZero();
  }

  /** Waits for a send's outcome to be recorded, then proves it by a replay through the store. */
  private void assertRecorded(String event) throws Exception {
    await("the outcome recorded", () -> events.count(Type.COMPLETED, RECORD, event) == 1);
    AtomicBoolean ranAgain = new AtomicBoolean();
    guard.execute(
        IdempotencyKey.of(RECORD, event),
        Duration.ofHours(1),
        context -> {
          ranAgain.set(true);
          return "again";
        });
    assertThat(ranAgain).as("a repeat of the key through the store is a replay").isFalse();
  }

  private boolean queueIsEmpty(String queue) {
    return QueueBrowsing.isEmpty(template, queue);
  }

  /** The committed messages the listener sent on, browsed. */
  private List<String> sentOn() {
    return QueueBrowsing.texts(template, OUTPUT);
  }

  /**
   * Publishes {@code event} again, as the producer's retry does. The listener's session, closed by
   * the simulated lost commit answer, may go back to the caching connection factory that the
   * template shares with the listener container, and the template may be handed it (Artemis's
   * "AMQ219019: Session is closed" at {@code createProducer}, seen once on Boot 4.0, before
   * anything was sent): then the copy is published on a connection of its own, from the factory the
   * cache wraps; where the template's factory wraps none (seen once on Boot 3.5, in a loaded
   * clean-clone run), the template's send is tried again (up to 20 times, 250 ms apart) until the
   * cache hands out a live session. Any other failure fails the test.
   */
  private void republish(String event) throws InterruptedException {
    for (int attempt = 1; ; attempt++) {
      try {
        template.convertAndSend("idem.tx", event);
        return;
      } catch (org.springframework.jms.IllegalStateException closed) {
        if (closed.getMessage() == null || !closed.getMessage().contains("AMQ219019")) {
          throw closed;
        }
        if (template.getConnectionFactory() instanceof SingleConnectionFactory cache
            && cache.getTargetConnectionFactory() != null) {
          new JmsTemplate(cache.getTargetConnectionFactory()).convertAndSend("idem.tx", event);
          return;
        }
        if (attempt == 20) {
          throw closed;
        }
        Thread.sleep(250);
      }
    }
  }
}
