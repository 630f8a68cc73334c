package dev.idempotency.examples.worker;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.examples.providers.FakeEmailProvider;
import dev.idempotency.inmemory.InMemoryKeyStore;
import java.time.Duration;
import java.time.Instant;

/**
 * A queue worker under redelivery: 100 events, a third of acknowledgements lost, redelivered until
 * every event is acknowledged. Prints how many deliveries and how many emails there were.
 *
 * <p>Run it with {@code mvn -q -pl examples -am compile exec:java
 * -Ddemo.main=dev.idempotency.examples.worker.WorkerDemo}.
 */
public final class WorkerDemo {

  private WorkerDemo() {}

  /**
   * Runs the demo.
   *
   * @param args ignored
   * @throws InterruptedException if interrupted
   */
  public static void main(String[] args) throws InterruptedException {
    RedeliveringQueue<OrderShipped> queue = new RedeliveringQueue<>();
    FakeEmailProvider email = new FakeEmailProvider();
    IdempotencyGuard guard =
        IdempotencyGuard.builder().store(InMemoryKeyStore.builder().build()).build();
    NotificationWorker worker =
        new NotificationWorker(queue, guard, email, NotificationWorker.randomly(0.33, 42));

    Instant start = Instant.parse("2030-05-01T10:00:00Z");
    for (int i = 1; i <= 100; i++) {
      queue.publish(
          new OrderShipped(
              "user_" + i,
              "order_" + (7000 + i),
              "user" + i + "@example.com",
              start.plusSeconds(i)));
    }
    int deliveries = 0;
    while (!queue.isDrained()) {
      deliveries += worker.drain(Duration.ofMillis(50));
      queue.redeliverUnacknowledged();
    }
    System.out.println("events published:    100");
    System.out.println(
        "deliveries handled:  " + deliveries + " (" + queue.redeliveries() + " redeliveries)");
    System.out.println("emails sent:         " + email.accepted().size());
  }
}
