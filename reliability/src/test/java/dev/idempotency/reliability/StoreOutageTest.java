package dev.idempotency.reliability;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.IdempotencyEvent;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.KeyStoreException;
import dev.idempotency.Outcome;
import dev.idempotency.ResultCodec;
import dev.idempotency.jdbc.JdbcKeyStore;
import dev.idempotency.redis.RedisKeyStore;
import dev.idempotency.spi.KeyStore;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.jdbi.v3.core.Jdbi;
import org.junit.jupiter.api.Test;

/**
 * The store dies mid-run and comes back: fail closed (or open, if configured) while it is down; the
 * same guard works afterwards; what was recorded before is still replayed where the store is
 * durable.
 */
class StoreOutageTest {

  static final Duration TTL = Duration.ofHours(1);

  final AtomicInteger sends = new AtomicInteger();
  final List<IdempotencyEvent> events = new CopyOnWriteArrayList<>();

  Sender sender() {
    return new Sender();
  }

  final class Sender implements dev.idempotency.Sender<String> {
    @Override
    public String send(dev.idempotency.SendContext ctx) {
      return "n_" + sends.incrementAndGet();
    }
  }

  /** Runs the outage scenario; {@code down} and {@code up} stop and restart the store. */
  void outage(KeyStore store, ThrowingRunnable down, ThrowingRunnable up, boolean expectReplays)
      throws Exception {
    IdempotencyGuard closed = IdempotencyGuard.builder().store(store).build();
    IdempotencyGuard open =
        IdempotencyGuard.builder().store(store).failOpen(true).listener(events::add).build();
    List<String> keys = new ArrayList<>();
    List<String> results = new ArrayList<>();
    for (int i = 0; i < 50; i++) {
      String key = "outage:" + UUID.randomUUID();
      keys.add(key);
      results.add(closed.execute(key, TTL, sender()));
    }
    int sentBefore = sends.get();

    down.run();

    for (int i = 0; i < 5; i++) {
      assertThatThrownBy(() -> closed.execute("down:" + UUID.randomUUID(), TTL, sender()))
          .isInstanceOf(KeyStoreException.class);
    }
    assertThat(sends).as("fail-closed sends nothing while the store is down").hasValue(sentBefore);
    for (int i = 0; i < 3; i++) {
      Outcome<String> sentAnyway =
          open.executeForOutcome(
              IdempotencyRequest.of("down-open:" + UUID.randomUUID(), TTL),
              ResultCodec.string(),
              sender());
      assertThat(sentAnyway.recorded()).isFalse();
    }
    assertThat(sends).as("fail-open sends and reports").hasValue(sentBefore + 3);
    assertThat(events.stream().filter(e -> e.type() == IdempotencyEvent.Type.FAIL_OPEN_SEND))
        .hasSize(3);

    up.run();
    String probe = "back:" + UUID.randomUUID();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
    while (true) {
      try {
        closed.execute(probe, TTL, sender());
        break;
      } catch (KeyStoreException e) {
        if (System.nanoTime() > deadline) {
          throw new AssertionError("the store did not come back", e);
        }
        Thread.sleep(100);
      }
    }

    int sentAfterRecovery = sends.get();
    for (int i = 0; i < keys.size(); i++) {
      String again = closed.execute(keys.get(i), TTL, sender());
      if (expectReplays) {
        assertThat(again).as("recorded before the outage").isEqualTo(results.get(i));
      }
    }
    if (expectReplays) {
      assertThat(sends)
          .as("nothing recorded before the outage was sent again")
          .hasValue(sentAfterRecovery);
    } else {
      assertThat(sends.get() - sentAfterRecovery)
          .as("without persistence, every key recorded before the outage is sent again")
          .isEqualTo(keys.size());
    }
  }

  interface ThrowingRunnable {
    void run() throws Exception;
  }

  @Test
  void redisKilledAndRestartedWithAppendOnlyFileReplaysEverythingRecordedBefore() throws Exception {
    try (RestartableRedis redis = new RestartableRedis(true)) {
      RedisKeyStore store =
          RedisKeyStore.builder(Stores.redisClient(redis.uri(), Duration.ofSeconds(2))).build();
      outage(store, redis::kill, redis::start, true);
    }
  }

  @Test
  void redisKilledAndRestartedWithoutPersistenceForgetsAndResends() throws Exception {
    try (RestartableRedis redis = new RestartableRedis(false)) {
      RedisKeyStore store =
          RedisKeyStore.builder(Stores.redisClient(redis.uri(), Duration.ofSeconds(2))).build();
      outage(store, redis::kill, redis::start, false);
    }
  }

  @Test
  void postgresStoppedAndStartedAgainReplaysEverythingRecordedBefore() throws Exception {
    try (RestartablePostgres postgres = new RestartablePostgres()) {
      JdbcKeyStore store =
          JdbcKeyStore.builder(Jdbi.create(postgres.url() + "&connectTimeout=2&socketTimeout=5"))
              .tableName("idem_outage")
              .createSchemaIfMissing(true)
              .databaseTime(true)
              .build();
      outage(store, postgres::stop, postgres::restart, true);
    }
  }
}
