package dev.idempotency.spring.messaging.rabbit;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Probe41 (adversarial review of kbatch40, SPEC 1) on RabbitMQ: a batch {@code @IdempotentListener}
 * that copies its list ({@code new ArrayList<>(list)}) before its sends, and whose second message's
 * send fails (named by index). RabbitMQ redelivers the whole batch; the promise is that each
 * message is sent once. The copy read every element of {@code HandedOutList}, and every read counts
 * as sent. Runs on {@link RabbitListenerTest}'s application (and inherits its tests).
 */
@Tag("open-finding")
class RabbitBatchCopyProbeTest extends RabbitListenerTest {

  @Test
  void aCopiedBatchWhoseSecondMessageFailsSendsEveryMessageOnce() throws Exception {
    String first = unique("b-copy-first");
    String second = unique("b-copy-second");
    String third = unique("b-copy-third");
    sends.failNext(second, 1);
    sends.copyBatches(true);
    try {
      publishBatch(List.of(first, second, third));
      await("the failed message sent", () -> sends.of(second).size() == 1);
      assertAcknowledged(batchListener());
      assertThat(
              new int[] {sends.of(first).size(), sends.of(second).size(), sends.of(third).size()})
          .as("provider sends of the three messages")
          .containsExactly(1, 1, 1);
    } finally {
      sends.copyBatches(false);
      afterBatch();
    }
  }
}
