package dev.idempotency.examples.worker;

import java.time.Duration;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * An in-process, at-least-once queue: a delivered message that is not acknowledged goes back on the
 * queue when {@link #redeliverUnacknowledged()} runs (as a broker does after a visibility timeout
 * or a consumer crash). So a consumer sees some messages more than once.
 *
 * @param <T> the message type
 */
public final class RedeliveringQueue<T> {

  /**
   * One delivery of a message.
   *
   * @param deliveryId unique per delivery
   * @param message the message
   * @param attempt 1 for the first delivery, then one more per redelivery
   * @param <T> the message type
   */
  public record Delivery<T>(long deliveryId, T message, int attempt) {}

  private final BlockingQueue<Delivery<T>> ready = new LinkedBlockingQueue<>();
  private final Map<Long, Delivery<T>> unacknowledged = new ConcurrentHashMap<>();
  private final AtomicLong ids = new AtomicLong();
  private final AtomicLong redeliveries = new AtomicLong();

  /**
   * Publishes a message.
   *
   * @param message the message
   */
  public void publish(T message) {
    ready.add(new Delivery<>(ids.incrementAndGet(), message, 1));
  }

  /**
   * Takes the next delivery, waiting up to {@code timeout}.
   *
   * @param timeout how long to wait
   * @return the delivery, or {@code null} if none came
   * @throws InterruptedException if interrupted
   */
  public Delivery<T> poll(Duration timeout) throws InterruptedException {
    Delivery<T> delivery = ready.poll(timeout.toMillis(), TimeUnit.MILLISECONDS);
    if (delivery != null) {
      unacknowledged.put(delivery.deliveryId(), delivery);
    }
    return delivery;
  }

  /**
   * Acknowledges a delivery: it will not come again.
   *
   * @param delivery the delivery
   */
  public void acknowledge(Delivery<T> delivery) {
    unacknowledged.remove(delivery.deliveryId());
  }

  /**
   * Puts every delivered but unacknowledged message back on the queue.
   *
   * @return how many were redelivered
   */
  public int redeliverUnacknowledged() {
    int count = 0;
    for (Delivery<T> delivery : unacknowledged.values()) {
      if (unacknowledged.remove(delivery.deliveryId()) != null) {
        ready.add(
            new Delivery<>(ids.incrementAndGet(), delivery.message(), delivery.attempt() + 1));
        count++;
      }
    }
    redeliveries.addAndGet(count);
    return count;
  }

  /**
   * Whether nothing is waiting and nothing is unacknowledged.
   *
   * @return {@code true} when drained
   */
  public boolean isDrained() {
    return ready.isEmpty() && unacknowledged.isEmpty();
  }

  /**
   * How many redeliveries happened.
   *
   * @return the count
   */
  public long redeliveries() {
    return redeliveries.get();
  }
}
