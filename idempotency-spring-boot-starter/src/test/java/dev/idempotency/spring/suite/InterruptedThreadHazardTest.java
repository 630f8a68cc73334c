package dev.idempotency.spring.suite;

import static dev.idempotency.spring.suite.Stack.PROVIDER;
import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.io.IOException;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * SPEC 16, a thread interrupted by the application, on every entry point: the application
 * interrupts the thread its provider call runs on while the send runs; the provider's client does
 * not stop for it, and the send returns with the thread's interrupt status still set, so the guard
 * records the outcome on an interrupted thread. The outcome is recorded all the same: one send, and
 * a repeat replays it (the first caller's own answer may be lost with its interrupted thread).
 */
class InterruptedThreadHazardTest extends HazardTest {

  @ParameterizedTest
  @MethodSource("dev.idempotency.spring.suite.HazardTest#entryPoints")
  void anInterruptMidSendStillRecordsTheOutcome(EntryPoint entry) throws Exception {
    String key = Waits.newKey(entry);
    PROVIDER.interruptSenders(true);
    Answer first = null;
    try {
      first = entry.call(key);
    } catch (IOException lostWithTheInterruptedThread) {
      // the answer's connection may go with the thread; the outcome must not
    }
    PROVIDER.interruptSenders(false);
    assertThat(PROVIDER.sends(key)).as("the send ran: " + first).isEqualTo(1);

    Answer repeat = Waits.callUntil(() -> callAgain(entry, key), Answer::inProgress);
    assertThat(repeat.status()).as(repeat.toString()).isEqualTo(200);
    assertThat(repeat.body()).as("the repeat replays").contains("sent-" + key + "-1");
    if (first != null && first.status() == 200) {
      assertThat(first.body()).isEqualTo(repeat.body());
    }
    assertThat(PROVIDER.sends(key)).as("one provider send").isEqualTo(1);
  }

  /**
   * On a listener: the container's consumer thread is interrupted mid-send. The outcome is recorded
   * all the same, the delivery acknowledged, and the message published again is a replay: one send,
   * nothing dead-lettered; and the container's consumer goes on as before: the next message is
   * sent, and no poll or commit of the consumer failed on the interrupted thread (a RabbitMQ
   * consumer left interrupted stopped its container; a Kafka consumer failed every poll). An
   * application of the test's own, since the interrupt lands on its consumer thread.
   */
  @ParameterizedTest
  @MethodSource("dev.idempotency.spring.suite.HazardTest#listenerEntryPoints")
  void anInterruptMidDeliveryStillRecordsTheOutcome(ListenerEntryPoint entry) throws Exception {
    assertAnInterruptMidDeliveryStillRecordsTheOutcome(entry, entry.operation(), entry::start);
  }

  /**
   * The same on an {@code @Idempotent} {@code @RabbitListener} method (rather than an {@code
   * IdempotentListener}): its consumer thread, left interrupted, stopped its container.
   */
  @Test
  void anInterruptMidDeliveryOfAnIdempotentRabbitListenerMethodStillRecordsTheOutcome()
      throws Exception {
    assertAnInterruptMidDeliveryStillRecordsTheOutcome(
        "rabbit-idempotent-method",
        SuiteRabbitApplication.METHOD_LISTENER,
        RabbitListenerApplication::idempotentMethod);
  }

  /**
   * Interrupts the consumer thread of an application ({@code starter}; its listener's operation
   * {@code operation}, its keys named after {@code entry}) mid-send; checks the rest.
   */
  private static void assertAnInterruptMidDeliveryStillRecordsTheOutcome(
      Object entry, String operation, ListenerEntryPoint.Starter starter) throws Exception {
    SuiteProvider provider = new SuiteProvider();
    String key = Waits.newKey(entry);
    try (ListenerApplication application =
        starter.start(
            new SwitchableKeyStore(),
            provider,
            new CountDownLatch(1),
            "idem.suite." + UUID.randomUUID())) {
      InterruptedDeliveries.assertSentOnce(application, provider, operation, key, entry, false);
      assertThat(application.consumerFailures())
          .as("the consumer's own failures after the interrupted delivery")
          .isEmpty();
    }
  }

  /**
   * Calls again; once more on a connection the server closed: the interrupted thread's channel may
   * have been closed by the interrupt after the client took it back for reuse.
   */
  private static Answer callAgain(EntryPoint entry, String key) throws Exception {
    try {
      return entry.call(key);
    } catch (IOException closedByTheInterrupt) {
      return entry.call(key);
    }
  }
}
