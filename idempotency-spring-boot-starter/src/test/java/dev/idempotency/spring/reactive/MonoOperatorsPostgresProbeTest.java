package dev.idempotency.spring.reactive;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.EmbeddedServers;
import dev.idempotency.spring.reactive.ReactiveMailer.Sent;
import java.sql.Connection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import javax.sql.DataSource;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * The operator probes (issue 39) on PostgreSQL with a pool of two connections, fewer than the
 * cancel test's forty keys at once: the store's calls wait on the guard's bounded executor, never
 * on a Reactor thread.
 */
// passes; outside CI's time budget (docs/guarantees.md, "Tests outside the default build")
@Tag("extended")
class MonoOperatorsPostgresProbeTest extends MonoOperatorsProbeContract {

  @DynamicPropertySource
  static void postgres(DynamicPropertyRegistry registry) {
    registry.add("spring.datasource.url", EmbeddedServers::postgresUrl);
    registry.add("spring.datasource.hikari.maximum-pool-size", () -> "2");
    registry.add("idempotency.jdbc.initialize-schema", () -> "always");
  }

  @Autowired DataSource dataSource;

  /**
   * Subscribers that cancel while their claims wait for a connection (both held elsewhere): no
   * claim left behind without a send, so once the pool is back each key's retry sends once.
   */
  @Test
  void subscribersCancelledWhileTheirClaimsWaitForAConnectionLeaveNoKeyClaimed() throws Exception {
    int keys = 10;
    List<String> orders = new ArrayList<>();
    List<Disposable> subscribers = new ArrayList<>();
    try (Connection one = dataSource.getConnection();
        Connection two = dataSource.getConnection()) {
      for (int i = 0; i < keys; i++) {
        String order = order();
        orders.add(order);
        subscribers.add(
            Mono.delay(Duration.ofMillis(100))
                .then(mailer.held(order).subscribeOn(Schedulers.parallel()))
                .subscribe(ignored -> {}, ignored -> {}));
      }
      Thread.sleep(300); // the claims are queued or waiting for a connection
      subscribers.forEach(Disposable::dispose);
    }
    for (String order : orders) {
      mailer.answer(order, new Sent("accepted", order));
    }

    for (String order : orders) {
      assertThat(heldRetried(order).block(Duration.ofSeconds(30)))
          .isEqualTo(new Sent("accepted", order));
    }
    assertThat(runs()).as("sends for %d keys", keys).isEqualTo(keys);
  }
}
