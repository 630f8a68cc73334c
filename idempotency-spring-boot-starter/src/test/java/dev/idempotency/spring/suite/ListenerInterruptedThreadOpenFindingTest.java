package dev.idempotency.spring.suite;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Open finding (tag {@code open-finding}, left out of the default Surefire run): on the Kafka batch
 * listener, a send whose thread is interrupted mid-send (the provider's client returns with the
 * interrupt status set, {@link SuiteProvider#interruptSenders}) is not recorded or not
 * acknowledged: the container's consumer thread keeps its interrupt status; every poll ends in
 * Kafka's {@code InterruptException} (which sets the status again), and the container logs
 * "Consumer exception" in a hot loop (several GB of log in 90 s: beware when running this class).
 * In one run the outcome was not recorded within 90 s; in the next it was, but the offset was never
 * committed within 90 s. Not diagnosed further. The same hazard passes on the Kafka record, JMS and
 * RabbitMQ listeners ({@link InterruptedThreadHazardTest}; JMS since its session commit and the
 * outcome's record hold the interrupt back).
 */
@Tag("open-finding")
class ListenerInterruptedThreadOpenFindingTest extends HazardTest {

  @ParameterizedTest
  @EnumSource(
      value = ListenerEntryPoint.class,
      names = {"KAFKA_BATCH"})
  void anInterruptMidDeliveryStillRecordsTheOutcome(ListenerEntryPoint entry) throws Exception {
    InterruptedThreadHazardTest.assertAnInterruptMidDeliveryStillRecordsTheOutcome(entry);
  }
}
