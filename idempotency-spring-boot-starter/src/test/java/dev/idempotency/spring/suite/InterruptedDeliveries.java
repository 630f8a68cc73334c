package dev.idempotency.spring.suite;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyEvent.Type;

/**
 * The suite's check of a listener delivery whose provider call leaves the consumer thread
 * interrupted, shared by {@link InterruptedThreadHazardTest} and the interrupt probes.
 */
final class InterruptedDeliveries {

  private InterruptedDeliveries() {}

  /**
   * Publishes {@code key} to {@code application}, its provider call interrupting the thread after a
   * send that succeeded or ({@code failFirst}) interrupting it and failing (then redelivered); then
   * checks: the outcome of {@code operation} recorded once, the consumer goes on (a message under a
   * new key named after {@code nextKeyName} is sent), a republished message is a replay and the
   * only one (the interrupted delivery was acknowledged the first time, not delivered again), one
   * provider send, nothing dead-lettered.
   */
  static void assertSentOnce(
      ListenerApplication application,
      SuiteProvider provider,
      String operation,
      String key,
      Object nextKeyName,
      boolean failFirst)
      throws Exception {
    if (failFirst) {
      provider.interruptAndFailNextSend();
    } else {
      provider.interruptSenders(true);
    }
    application.publish(key, key);
    Waits.await(failFirst ? "the redelivered send" : "the send", () -> provider.sends(key) >= 1);
    provider.interruptSenders(false);
    Waits.await(
        "the outcome recorded",
        () -> application.events().count(Type.COMPLETED, operation, key) == 1);
    String next = Waits.newKey(nextKeyName);
    application.publish(next, next);
    Waits.await(
        "the next message's send (the consumer goes on after the interrupted delivery)",
        () -> provider.sends(next) == 1);
    application.awaitAcknowledged();

    application.publish(key, key);
    Waits.await("the replay", () -> application.events().count(Type.REPLAYED, operation, key) >= 1);
    application.awaitAcknowledged();
    assertThat(application.events().count(Type.REPLAYED, operation, key))
        .as(
            "replays: the republished message's only (the interrupted delivery was acknowledged,"
                + " not delivered again)")
        .isEqualTo(1);
    assertThat(provider.sends(key)).as("one provider send").isEqualTo(1);
    assertThat(application.deadLettered()).isEmpty();
  }
}
