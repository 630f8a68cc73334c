package dev.idempotency.spring.messaging;

import java.time.Duration;
import java.util.Iterator;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Counts the deferrals of each key in this process, for brokers that cannot count them for us
 * (RabbitMQ's classic queues): a key not deferred for four longest pauses starts again from the
 * first. Bounded: past 10,000 keys, the forgotten ones are dropped. Thread-safe.
 */
final class DeferralCounter {

  private static final int MAX_TRACKED = 10_000;

  private final DeliveryBackOff backOff;
  private final Map<String, long[]> counts = new ConcurrentHashMap<>();

  DeferralCounter(DeliveryBackOff backOff) {
    this.backOff = backOff;
  }

  /** The pause before the next delivery of {@code id}, counting this deferral. */
  Duration next(String id) {
    long now = System.nanoTime();
    long forgetAfter = backOff.max().multipliedBy(4).toNanos();
    if (counts.size() > MAX_TRACKED) {
      for (Iterator<long[]> i = counts.values().iterator(); i.hasNext(); ) {
        if (now - i.next()[1] > forgetAfter) {
          i.remove();
        }
      }
    }
    long[] entry =
        counts.compute(
            id,
            (k, old) ->
                old == null || now - old[1] > forgetAfter
                    ? new long[] {0, now}
                    : new long[] {old[0] + 1, now});
    return backOff.delay((int) Math.min(entry[0], 64));
  }
}
