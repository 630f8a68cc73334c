package dev.idempotency.spring.suite;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Open finding (tag {@code open-finding}, left out of the default Surefire run): on two listeners,
 * a send whose thread is interrupted mid-send (the provider's client returns with the interrupt
 * status set, {@link SuiteProvider#interruptSenders}) is never recorded as completed (no {@code
 * COMPLETED} event within 90 s). The same hazard passes on the Kafka record and RabbitMQ listeners
 * ({@link InterruptedThreadHazardTest}).
 *
 * <ul>
 *   <li>{@link ListenerEntryPoint#JMS}: the starter commits the transacted session before it
 *       records the outcome ({@code JmsDeliveryListener.commitThenComplete}); Artemis's blocking
 *       commit on the interrupted thread throws {@code ActiveMQInterruptedException}, so the
 *       outcome is not completed, while the broker's audit log shows the message acknowledged: no
 *       redelivery, and the key stays in progress until its lease lapses.
 *   <li>{@link ListenerEntryPoint#KAFKA_BATCH}: the container's consumer thread keeps its interrupt
 *       status; every poll ends in Kafka's {@code InterruptException} (which sets the status
 *       again), and the container logs "Consumer exception" in a hot loop (several GB of log in 90
 *       s: beware when running this class). In one run the outcome was not recorded within 90 s; in
 *       the next it was, but the offset was never committed within 90 s (the message stays
 *       unacknowledged). Not diagnosed further.
 * </ul>
 */
@Tag("open-finding")
class ListenerInterruptedThreadOpenFindingTest extends HazardTest {

  @ParameterizedTest
  @EnumSource(
      value = ListenerEntryPoint.class,
      names = {"JMS", "KAFKA_BATCH"})
  void anInterruptMidDeliveryStillRecordsTheOutcome(ListenerEntryPoint entry) throws Exception {
    InterruptedThreadHazardTest.assertAnInterruptMidDeliveryStillRecordsTheOutcome(entry);
  }
}
