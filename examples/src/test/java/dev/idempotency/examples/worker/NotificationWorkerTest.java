package dev.idempotency.examples.worker;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.examples.providers.FakeEmailProvider;
import dev.idempotency.examples.providers.FakeProvider;
import dev.idempotency.inmemory.InMemoryKeyStore;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.function.Function;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

class NotificationWorkerTest {

  final RedeliveringQueue<OrderShipped> queue = new RedeliveringQueue<>();
  final FakeEmailProvider email = new FakeEmailProvider();
  final IdempotencyGuard guard =
      IdempotencyGuard.builder().store(InMemoryKeyStore.builder().build()).build();
  final Instant start = Instant.parse("2030-05-01T10:00:00Z");

  void publish(int events) {
    for (int i = 1; i <= events; i++) {
      queue.publish(
          new OrderShipped(
              "user_" + i, "order_" + i, "u" + i + "@example.com", start.plusSeconds(i)));
    }
  }

  @Test
  void redeliveriesProduceNoSecondEmail() throws Exception {
    publish(200);
    NotificationWorker worker =
        new NotificationWorker(queue, guard, email, NotificationWorker.randomly(0.4, 7));

    int deliveries = 0;
    for (int round = 0; round < 100 && !queue.isDrained(); round++) {
      deliveries += worker.drain(Duration.ofMillis(20));
      queue.redeliverUnacknowledged();
    }

    assertThat(queue.isDrained()).isTrue();
    assertThat(queue.redeliveries()).isPositive();
    assertThat(deliveries).isEqualTo(200 + queue.redeliveries());
    assertThat(email.accepted()).hasSize(200);
    Map<String, Long> perRecipient =
        email.accepted().stream()
            .collect(Collectors.groupingBy(FakeProvider.Message::recipient, Collectors.counting()));
    assertThat(perRecipient)
        .hasSize(200)
        .allSatisfy((recipient, count) -> assertThat(count).isEqualTo(1));
  }

  @Test
  void twoWorkersRacingOverRedeliveriesSendEachEventOnce() throws Exception {
    publish(300);
    NotificationWorker a =
        new NotificationWorker(queue, guard, email, NotificationWorker.randomly(0.5, 1));
    NotificationWorker b =
        new NotificationWorker(queue, guard, email, NotificationWorker.randomly(0.5, 2));

    for (int round = 0; round < 100 && !queue.isDrained(); round++) {
      CompletableFuture<Integer> first = CompletableFuture.supplyAsync(() -> drain(a));
      CompletableFuture<Integer> second = CompletableFuture.supplyAsync(() -> drain(b));
      first.get();
      second.get();
      queue.redeliverUnacknowledged();
    }

    assertThat(queue.isDrained()).isTrue();
    assertThat(email.accepted()).hasSize(300);
  }

  @Test
  void keyIsDerivedFromBusinessFactsAndTheEventTimeNotTheDelivery() {
    OrderShipped event = new OrderShipped("user_1", "order_1", "u1@example.com", start);
    OrderShipped sameDay =
        new OrderShipped("user_1", "order_1", "u1@example.com", start.plusSeconds(60));
    OrderShipped otherOrder = new OrderShipped("user_1", "order_2", "u1@example.com", start);

    assertThat(NotificationWorker.keyOf(event))
        .isEqualTo(NotificationWorker.keyOf(sameDay))
        .isNotEqualTo(NotificationWorker.keyOf(otherOrder))
        .startsWith("order-shipped:");
    assertThat(
            List.of(event).stream()
                .map(NotificationWorker::keyOf)
                .map(Function.identity())
                .toList())
        .hasSize(1);
  }

  private static int drain(NotificationWorker worker) {
    try {
      return worker.drain(Duration.ofMillis(20));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }
}
