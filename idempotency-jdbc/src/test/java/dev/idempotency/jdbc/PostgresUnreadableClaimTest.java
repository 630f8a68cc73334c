package dev.idempotency.jdbc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.Batch;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.KeyStoreException;
import dev.idempotency.ResultCodec;
import dev.idempotency.UnreadableRecordException;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * Regression test of probe42h's finding (lazy37b's fix, SPEC 14) on a real PostgreSQL: a row whose
 * {@code state} is not one of the store's states is "that lookup's error, the breaker stays
 * closed". A lookup holds; a claim of that key (a client retrying it) opens the guard's breaker and
 * refuses the next send of a healthy key at once. Now a claim of it, blocking, async or in a batch
 * beside healthy keys, fails with {@link UnreadableRecordException} for that key alone and the
 * breaker stays closed.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class PostgresUnreadableClaimTest {

  static final Duration TTL = Duration.ofHours(1);
  static final int ROUNDS = 10;

  private EmbeddedPostgres postgres;
  private HikariDataSource pool;

  @BeforeAll
  void startPostgres() throws Exception {
    postgres = EmbeddedPostgres.builder().setPGStartupWait(Duration.ofSeconds(120)).start();
    pool = Pools.of(postgres.getJdbcUrl("postgres", "postgres"), 4);
  }

  @AfterAll
  void stopPostgres() throws Exception {
    if (pool != null) {
      pool.close();
    }
    if (postgres != null) {
      postgres.close();
    }
  }

  @Test
  void aClaimOfAnUnreadableRowDoesNotRefuseOtherKeys() throws Exception {
    String table = "unreadable_claim";
    JdbcKeyStore store =
        JdbcKeyStore.builder(pool).tableName(table).createSchemaIfMissing(true).build();
    try (IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build()) {
      String damaged = "order:" + UUID.randomUUID();
      assertThat(guard.execute(damaged, TTL, ctx -> "sent")).isEqualTo("sent");
      damage(table);

      AtomicInteger damagedSends = new AtomicInteger();
      List<String> refusedOthers = new ArrayList<>();
      for (int round = 0; round < ROUNDS; round++) {
        assertThatThrownBy(
                () ->
                    guard.execute(
                        damaged,
                        TTL,
                        ctx -> {
                          damagedSends.incrementAndGet();
                          return "sent again";
                        }))
            .isInstanceOf(UnreadableRecordException.class)
            .hasMessageContaining("cannot read")
            .hasMessageContaining("nothing was sent");
        try {
          guard.execute("order:" + UUID.randomUUID(), TTL, ctx -> "other sent");
        } catch (KeyStoreException refused) {
          refusedOthers.add(refused.getMessage());
        }
      }

      assertThat(damagedSends).as("the unreadable key is never sent again").hasValue(0);
      assertThat(refusedOthers)
          .as("sends of healthy keys right after a claim of the unreadable key")
          .isEmpty();
    }
  }

  @Test
  void anAsyncClaimOrABatchOfAnUnreadableRowFailsForThatKeyAlone() throws Exception {
    String table = "unreadable_batch";
    JdbcKeyStore store =
        JdbcKeyStore.builder(pool).tableName(table).createSchemaIfMissing(true).build();
    try (IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build()) {
      String damaged = "order:" + UUID.randomUUID();
      assertThat(guard.execute(damaged, TTL, ctx -> "sent")).isEqualTo("sent");
      damage(table);

      AtomicInteger damagedSends = new AtomicInteger();
      CompletableFuture<String> damagedCall =
          guard
              .executeAsync(
                  damaged,
                  TTL,
                  ctx -> {
                    damagedSends.incrementAndGet();
                    return CompletableFuture.completedFuture("sent again");
                  })
              .toCompletableFuture();
      assertThatThrownBy(() -> damagedCall.get(60, TimeUnit.SECONDS))
          .hasCauseInstanceOf(UnreadableRecordException.class);

      String healthy = "order:" + UUID.randomUUID();
      try (Batch<String> batch =
          guard.claimBatch(
              List.of(IdempotencyRequest.of(damaged, TTL), IdempotencyRequest.of(healthy, TTL)),
              ResultCodec.string())) {
        assertThat(batch.refused().keySet()).containsExactly(damaged);
        assertThat(batch.refused().get(damaged)).isInstanceOf(UnreadableRecordException.class);
        assertThat(batch.claimedKeys()).as("the healthy key of the batch").containsExactly(healthy);
        for (Batch.Item item : batch.toSend()) {
          batch.succeeded(item, "batch sent");
        }
      }
      assertThat(
              guard
                  .executeAsync(
                      "order:" + UUID.randomUUID(),
                      TTL,
                      ctx -> CompletableFuture.completedFuture("other sent"))
                  .toCompletableFuture()
                  .get(60, TimeUnit.SECONDS))
          .as("a healthy key's send right after")
          .isEqualTo("other sent");
      assertThat(damagedSends).as("the unreadable key is never sent again").hasValue(0);
    }
  }

  private void damage(String table) throws Exception {
    try (Connection connection = pool.getConnection();
        Statement statement = connection.createStatement()) {
      // a fixed test table name: no user input reaches this SQL
      assertThat(statement.executeUpdate("UPDATE " + table + " SET state = 'DAMAGED'"))
          .isEqualTo(1);
    }
  }
}
