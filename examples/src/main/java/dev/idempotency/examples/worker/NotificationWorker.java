package dev.idempotency.examples.worker;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.IdempotencyWindows;
import dev.idempotency.examples.providers.FakeEmailProvider;
import java.time.Duration;
import java.util.Random;
import java.util.function.Predicate;

/**
 * Consumes {@link OrderShipped} events from an at-least-once queue and emails the customer once.
 * The events carry no key, so the worker derives one from the business facts: the user, the
 * template, the order, and a window bucket of the event's own creation time (never the time of the
 * redelivery). A redelivered event gets the same key and is replayed, not sent again.
 */
public final class NotificationWorker {

  /** The template this worker sends. */
  public static final String TEMPLATE = "order-shipped-v2";

  private final RedeliveringQueue<OrderShipped> queue;
  private final IdempotencyGuard guard;
  private final FakeEmailProvider email;
  private final Predicate<RedeliveringQueue.Delivery<OrderShipped>> loseAcknowledgement;

  /**
   * Creates a worker.
   *
   * @param queue the queue to consume
   * @param guard the guard
   * @param email the provider
   * @param loseAcknowledgement which deliveries "crash" after sending and before acknowledging
   */
  public NotificationWorker(
      RedeliveringQueue<OrderShipped> queue,
      IdempotencyGuard guard,
      FakeEmailProvider email,
      Predicate<RedeliveringQueue.Delivery<OrderShipped>> loseAcknowledgement) {
    this.queue = queue;
    this.guard = guard;
    this.email = email;
    this.loseAcknowledgement = loseAcknowledgement;
  }

  /**
   * A predicate that loses a fraction of acknowledgements at random, as flaky consumers do.
   *
   * @param fraction 0 to 1
   * @param seed the random seed
   * @return the predicate
   */
  public static Predicate<RedeliveringQueue.Delivery<OrderShipped>> randomly(
      double fraction, long seed) {
    Random random = new Random(seed);
    return delivery -> {
      synchronized (random) {
        return random.nextDouble() < fraction;
      }
    };
  }

  /** The stable key of an event. */
  static String keyOf(OrderShipped event) {
    return IdempotencyKey.derive("order-shipped")
        .fact("user", event.userId())
        .fact("template", TEMPLATE)
        .fact("order", event.orderId())
        .window(event.createdAt(), Duration.ofHours(24))
        .build();
  }

  /**
   * Handles deliveries until none arrives for {@code idle}.
   *
   * @param idle how long an empty queue means done
   * @return how many deliveries were handled
   * @throws InterruptedException if interrupted
   */
  public int drain(Duration idle) throws InterruptedException {
    int handled = 0;
    RedeliveringQueue.Delivery<OrderShipped> delivery;
    while ((delivery = queue.poll(idle)) != null) {
      OrderShipped event = delivery.message();
      guard.execute(
          keyOf(event),
          IdempotencyWindows.TRANSACTIONAL,
          ctx ->
              email.send(
                  event.email(),
                  "Your order " + event.orderId() + " has shipped",
                  "Hi " + event.userId(),
                  ctx.providerKey()));
      handled++;
      if (!loseAcknowledgement.test(delivery)) {
        queue.acknowledge(delivery);
      }
    }
    return handled;
  }
}
