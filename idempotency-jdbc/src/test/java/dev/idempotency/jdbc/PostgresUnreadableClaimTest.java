package dev.idempotency.jdbc;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.UnreadableRecordException;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.UnreadableRecordContract;
import java.sql.Connection;
import java.sql.Statement;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.TestInstance;

/**
 * Regression test of probe42h's finding (lazy37b's fix, SPEC 14) on a real PostgreSQL: a row whose
 * {@code state} is not one of the store's states is "that lookup's error, the breaker stays
 * closed". A lookup holds; a claim of that key (a client retrying it) opens the guard's breaker and
 * refuses the next send of a healthy key at once. Now a claim of it, blocking, async or in a batch
 * beside healthy keys, fails with {@link UnreadableRecordException} for that key alone and the
 * breaker stays closed ({@link UnreadableRecordContract}, a table per test).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class PostgresUnreadableClaimTest extends UnreadableRecordContract {

  private HikariDataSource pool;

  @BeforeAll
  void startPostgres() throws Exception {
    pool = SharedPostgres.pool("unreadable_claim", 4);
  }

  @AfterAll
  void stopPostgres() throws Exception {
    if (pool != null) {
      pool.close();
    }
  }

  @Override
  protected KeyStore newStore(String name) {
    return JdbcKeyStore.builder(pool).tableName(table(name)).createSchemaIfMissing(true).build();
  }

  @Override
  protected void damageTheOnlyRecord(String name) throws Exception {
    try (Connection connection = pool.getConnection();
        Statement statement = connection.createStatement()) {
      // the contract's name is letters, digits and underscores: no user input reaches this SQL
      assertThat(statement.executeUpdate("UPDATE " + table(name) + " SET state = 'DAMAGED'"))
          .isEqualTo(1);
    }
  }

  private static String table(String name) {
    return "unreadable_" + name;
  }
}
