package dev.idempotency.jdbc;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.IdempotencyGuard;
import java.sql.Connection;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * Probe (issue 38, SPEC 17: "a transaction on another DataSource, joining is refused ... never
 * silently ignored"): {@code store.joining(connection)} accepts a connection to another database
 * that happens to hold a table of the same name. The joined call's record commits there, the
 * guard's usual mode, {@code find} and {@code forget} read the store's own database, and the next
 * call of the key sends again.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class JoinedOtherDatabaseProbeTest {

  private static final Duration TTL = Duration.ofHours(1);

  private HikariDataSource storeDatabase;
  private HikariDataSource otherDatabase;

  @BeforeAll
  void start() {
    storeDatabase = Pools.of("jdbc:h2:mem:joinedprobe_store;DB_CLOSE_DELAY=-1", 4);
    otherDatabase = Pools.of("jdbc:h2:mem:joinedprobe_other;DB_CLOSE_DELAY=-1", 4);
  }

  @AfterAll
  void stop() {
    storeDatabase.close();
    otherDatabase.close();
  }

  @Test
  void aConnectionToAnotherDatabaseIsRefusedOrTheRepeatReplays() throws Exception {
    JdbcKeyStore store =
        JdbcKeyStore.builder(storeDatabase)
            .tableName("idem")
            .createSchemaIfMissing(true)
            .connectionWait(Duration.ofSeconds(30))
            .build();
    // the same table in the other database (a second tenant's, a copy): created by its own store
    JdbcKeyStore other =
        JdbcKeyStore.builder(otherDatabase)
            .tableName("idem")
            .createSchemaIfMissing(true)
            .connectionWait(Duration.ofSeconds(30))
            .build();
    try (IdempotencyGuard otherGuard = IdempotencyGuard.builder().store(other).build()) {
      otherGuard.execute("warm-up:" + UUID.randomUUID(), TTL, ctx -> "created");
    }
    String key = "other-db:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();

    try (IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
        Connection connection = otherDatabase.getConnection()) {
      guard.execute("warm-up:" + UUID.randomUUID(), TTL, ctx -> "created");
      connection.setAutoCommit(false);
      boolean refused = false;
      try {
        guard.executeInTransaction(
            store.joining(connection), key, TTL, ctx -> "sent " + sends.incrementAndGet());
        connection.commit();
      } catch (IllegalArgumentException | IllegalStateException expected) {
        refused = true;
        connection.rollback();
      }
      connection.setAutoCommit(true);

      String repeat = guard.execute(key, TTL, ctx -> "sent " + sends.incrementAndGet());

      // fails today: the join is accepted, its record lands in the other database, the repeat
      // finds nothing in the store's own and sends a second time
      if (!refused) {
        assertThat(repeat).as("a repeat of a committed joined call").isEqualTo("sent 1");
      }
      assertThat(sends).as("sends of one key").hasValue(1);
    }
  }
}
