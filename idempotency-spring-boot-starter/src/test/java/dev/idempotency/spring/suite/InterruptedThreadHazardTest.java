package dev.idempotency.spring.suite;

import static dev.idempotency.spring.suite.Stack.PROVIDER;
import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
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
