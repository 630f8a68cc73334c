package dev.idempotency.spring.suite;

import org.junit.jupiter.api.Test;

/**
 * Issue 37 re-probe (probe37e), held: a batch {@code @IdempotentListener} that reads its list
 * ({@code HandedOutList}) from the last message to the first, sending each, then reads it all
 * again. Each message is sent once, the batch is acknowledged, and each republished message is a
 * replay ({@link KafkaBatchReadsTest}'s application and checks). Passed when run by fixkafka (Boot
 * 3.5 and 4.0), so it runs with the suite.
 */
class KafkaBatchReadOrderProbeTest {

  @Test
  void aListReadBackwardsThenAgainIsSentOnceAndNeverAgain() throws Exception {
    KafkaBatchReadsTest.assertEachSentOnceThenReplayed("backwards-twice");
  }
}
