package dev.idempotency.jdbc;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.GuardOnStoreContract;
import dev.idempotency.tck.KeyStoreContract;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * The contract on real PostgreSQL with database time: every lease and window is computed from the
 * database's clock, and the request's time is ignored.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class PostgresDatabaseTimeKeyStoreTest extends KeyStoreContract {

  private HikariDataSource pool;
  private JdbcKeyStore store;

  @BeforeAll
  void startPostgres() throws Exception {
    pool = SharedPostgres.pool("database_time", Pools.CONTRACT_SIZE);
    store =
        JdbcKeyStore.builder(pool)
            .tableName("idem_db_time")
            .createSchemaIfMissing(true)
            .databaseTime(true)
            .build();
  }

  @AfterAll
  void stopPostgres() throws Exception {
    if (pool != null) {
      pool.close();
    }
  }

  @Override
  protected KeyStore store() {
    return store;
  }

  /** The guard's promises on this store. */
  @Nested
  class OnTheGuard extends GuardOnStoreContract {
    @Override
    protected KeyStore store() {
      return PostgresDatabaseTimeKeyStoreTest.this.store();
    }
  }

  /** probeL: the take-back raced on the database's clock (lapseTakeover's LEAST with now()). */
  @Nested
  class TakeBackRaces extends dev.idempotency.tck.TakeBackRaceProbe {
    @Override
    protected KeyStore store() {
      return PostgresDatabaseTimeKeyStoreTest.this.store();
    }
  }

  @Test
  void storeReportsServerTime() {
    assertThat(store.usesServerTime()).isTrue();
  }
}
