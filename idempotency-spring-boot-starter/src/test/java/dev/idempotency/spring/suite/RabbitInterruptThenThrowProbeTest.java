package dev.idempotency.spring.suite;

import org.junit.jupiter.api.Test;

/**
 * Issue 37 re-probe (probe37e): {@link ListenerInterruptThenThrowTest}'s probe on the RabbitMQ
 * listener, which it does not run: the provider call interrupts the consumer thread and fails. The
 * promise (SPEC 1, 6, 15, 16): released, redelivered and sent once, the consumer goes on, nothing
 * dead-lettered, a republished message is a replay.
 */
class RabbitInterruptThenThrowProbeTest {

  @Test
  void anInterruptedFailedSendOnRabbitIsReleasedAndRedeliveredOnce() throws Exception {
    ListenerInterruptThenThrowTest.assertReleasedAndRedeliveredOnce(ListenerEntryPoint.RABBIT);
  }
}
