package dev.idempotency.spring.reactive;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.EmbeddedServers;
import dev.idempotency.spring.reactive.ReactiveMailer.Sent;
import io.lettuce.core.KillArgs;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import reactor.core.Disposable;
import reactor.core.scheduler.Schedulers;

/** The operator probes (issue 39) on Redis, whose store answers on Lettuce's event loop. */
// passes; outside CI's time budget (docs/guarantees.md, "Tests outside the default build")
@Tag("extended")
class MonoOperatorsRedisProbeTest extends MonoOperatorsProbeContract {

  @DynamicPropertySource
  static void redis(DynamicPropertyRegistry registry) {
    registry.add("idempotency.store", () -> "redis");
    registry.add("spring.data.redis.host", () -> "127.0.0.1");
    registry.add("spring.data.redis.port", EmbeddedServers::redisPort);
  }

  /**
   * Redis drops the application's connections ({@code CLIENT KILL TYPE normal}) between the claims
   * and the outcomes, half of the subscribers having cancelled: every outcome is recorded once
   * Lettuce reconnects, so each retry replays it and nothing is sent twice.
   */
  @Test
  void connectionsDroppedBetweenTheClaimsAndTheOutcomesNeitherLoseNorRepeatASend() {
    int keys = 10;
    List<String> orders = new ArrayList<>();
    List<Disposable> subscribers = new ArrayList<>();
    for (int i = 0; i < keys; i++) {
      String order = order();
      orders.add(order);
      subscribers.add(mailer.held(order).subscribeOn(Schedulers.parallel()).subscribe());
    }
    await(() -> runs() == keys);
    for (int i = 0; i < keys; i += 2) {
      subscribers.get(i).dispose();
    }
    RedisClient admin =
        RedisClient.create(RedisURI.create("127.0.0.1", EmbeddedServers.redisPort()));
    try (StatefulRedisConnection<String, String> connection = admin.connect()) {
      assertThat(connection.sync().clientKill(KillArgs.Builder.typeNormal())).isPositive();
    } finally {
      admin.shutdown();
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
