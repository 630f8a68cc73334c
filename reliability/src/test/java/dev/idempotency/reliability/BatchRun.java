package dev.idempotency.reliability;

import dev.idempotency.Batch;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.ResultCodec;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/** Sends a list of keys as batches, retrying keys in flight until each is sent or replayed. */
final class BatchRun {
  private BatchRun() {}

  /** Returns the keys this process sent. */
  static List<String> sendAll(IdempotencyGuard guard, List<String> keys)
      throws InterruptedException {
    List<String> sent = new ArrayList<>();
    List<String> pending = new ArrayList<>(keys);
    long deadline = System.nanoTime() + Duration.ofMinutes(5).toNanos();
    while (!pending.isEmpty()) {
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException(
            pending.size() + " keys still in flight after five minutes");
      }
      List<IdempotencyRequest> requests = new ArrayList<>();
      for (String key : pending) {
        requests.add(IdempotencyRequest.of(key, ReliabilityChild.TTL));
      }
      Batch<String> batch = guard.claimBatch(requests, ResultCodec.string());
      for (Batch.Item item : batch.toSend()) {
        batch.succeeded(item, "sent-by-" + ProcessHandle.current().pid());
        sent.add(item.key());
      }
      Batch.Recorded recorded = batch.record();
      if (!recorded.notRecorded().isEmpty() || !batch.refused().isEmpty()) {
        throw new IllegalStateException(
            "not recorded " + recorded.notRecorded() + ", refused " + batch.refused().keySet());
      }
      pending = new ArrayList<>(batch.inFlight());
      if (!pending.isEmpty()) {
        Thread.sleep(20);
      }
    }
    return sent;
  }
}
