package dev.idempotency.jdbc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.KeyStoreException;
import dev.idempotency.tck.StoreRecovery;
import dev.idempotency.testservers.FreePorts;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.sql.Connection;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.h2.jdbcx.JdbcDataSource;
import org.junit.jupiter.api.Test;

/**
 * SPEC section 14 on the JDBC store: a service whose database is down when it starts still builds
 * its store, fails each call closed within the connection wait, and works once the database is up,
 * without a restart; the table is checked; and a call never waits for a pooled connection longer
 * than the store's bound, whatever the pool's own timeout.
 */
class JdbcStoreAvailabilityTest {

  static final Duration TTL = Duration.ofHours(1);

  @Test
  void aStoreBuiltWhilePostgresIsDownFailsClosedThenWorksOnceItIsUp() throws Exception {
    int port = FreePorts.next();
    try (HikariDataSource dataSource =
        Pools.of(
            "jdbc:postgresql://127.0.0.1:" + port + "/postgres?user=postgres&connectTimeout=2",
            4)) {
      JdbcKeyStore store =
          JdbcKeyStore.builder(dataSource)
              .tableName("idem_started_down")
              .createSchemaIfMissing(true)
              .build();
      IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();

      long start = System.nanoTime();
      assertThatThrownBy(() -> guard.execute("down:" + UUID.randomUUID(), TTL, ctx -> "sent"))
          .isInstanceOf(KeyStoreException.class);
      long failedAfterMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
      assertThatThrownBy(store::tableExists).isInstanceOf(KeyStoreException.class);

      try (EmbeddedPostgres postgres =
          EmbeddedPostgres.builder()
              .setPort(port)
              .setPGStartupWait(Duration.ofSeconds(120))
              .start()) {
        String key = "up:" + UUID.randomUUID();
        String sent =
            StoreRecovery.sendOnceTheStoreAnswers(guard, key, TTL, Duration.ofSeconds(60));

        assertThat(failedAfterMillis)
            .as("failed within the connection wait, not Hikari's 30 s")
            .isLessThan(10_000);
        assertThat(sent).isEqualTo("sent");
        assertThat(guard.execute(key, TTL, ctx -> "again")).isEqualTo("sent");
        assertThat(store.tableExists()).isTrue();
        assertThat(store.dialect()).isEqualTo(JdbcDialect.POSTGRESQL);
      }
    }
  }

  @Test
  void tableExistsSaysWhetherTheTableIsThere() {
    JdbcDataSource h2 = new JdbcDataSource();
    h2.setURL("jdbc:h2:mem:table-check-" + UUID.randomUUID() + ";DB_CLOSE_DELAY=-1");

    assertThat(JdbcKeyStore.builder(h2).tableName("idem_never_created").build().tableExists())
        .isFalse();
    assertThat(
            JdbcKeyStore.builder(h2)
                .tableName("idem_created")
                .createSchemaIfMissing(true)
                .build()
                .tableExists())
        .isTrue();
  }

  /**
   * Every connection of the pool is taken (by the application, or by calls stuck on a slow
   * database): a call fails after the store's connection wait, not after HikariCP's 30 s.
   */
  @Test
  void aCallWaitsForAPooledConnectionNoLongerThanTheStoresBound() throws Exception {
    JdbcDataSource h2 = new JdbcDataSource();
    h2.setURL("jdbc:h2:mem:pool-" + UUID.randomUUID() + ";DB_CLOSE_DELAY=-1");
    HikariConfig config = new HikariConfig();
    config.setDataSource(h2);
    config.setMaximumPoolSize(1);
    config.setConnectionTimeout(30_000);
    try (HikariDataSource dataSource = new HikariDataSource(config)) {
      JdbcKeyStore store =
          JdbcKeyStore.builder(dataSource)
              .createSchemaIfMissing(true)
              .connectionWait(Duration.ofMillis(300))
              .build();
      IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
      guard.execute("warm:" + UUID.randomUUID(), TTL, ctx -> "sent");

      try (Connection taken = dataSource.getConnection()) {
        long start = System.nanoTime();
        assertThatThrownBy(() -> guard.execute("busy:" + UUID.randomUUID(), TTL, ctx -> "sent"))
            .isInstanceOf(KeyStoreException.class);
        long waited = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);

        assertThat(taken.isValid(1)).isTrue();
        assertThat(waited).isBetween(250L, 10_000L);
        assertThat(Thread.currentThread().isInterrupted())
            .as("the interrupt that ended the wait is cleared")
            .isFalse();
      }
      assertThat(guard.execute("after:" + UUID.randomUUID(), TTL, ctx -> "sent")).isEqualTo("sent");
    }
  }
}
