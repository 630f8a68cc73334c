package dev.idempotency.spring.messaging.jms;

import static dev.idempotency.spring.messaging.Polling.await;
import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.spring.messaging.Events;
import dev.idempotency.spring.messaging.IdempotentDelivery;
import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.JmsCommitRetries;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import dev.idempotency.spring.messaging.Sends;
import jakarta.jms.JMSException;
import jakarta.jms.Message;
import jakarta.jms.MessageProducer;
import jakarta.jms.Session;
import jakarta.jms.TextMessage;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Enumeration;
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

  /** The committed messages the listener sent on, browsed. */
  private List<String> sentOn() {
    return template.browse(
        OUTPUT,
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
}
