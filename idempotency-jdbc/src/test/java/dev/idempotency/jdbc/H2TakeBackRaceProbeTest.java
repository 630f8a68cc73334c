package dev.idempotency.jdbc;

import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.TakeBackRaceProbe;
import org.h2.tools.Server;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.TestInstance;

/**
 * probeL: the take-back's two statements raced by renewals, completions and third callers' claims,
 * each on its own pooled connection, on H2 2.x served over TCP.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class H2TakeBackRaceProbeTest extends TakeBackRaceProbe {

  private Server server;
  private HikariDataSource pool;
  private JdbcKeyStore store;

  @BeforeAll
  void start() throws Exception {
    server = Server.createTcpServer("-tcpPort", "0", "-ifNotExists").start();
    pool =
        Pools.of(
            "jdbc:h2:tcp://localhost:" + server.getPort() + "/mem:idem_race;DB_CLOSE_DELAY=-1",
            3 * KEYS + 4);
    store = JdbcKeyStore.builder(pool).tableName("idem_race").createSchemaIfMissing(true).build();
  }

  @AfterAll
  void stop() {
    if (pool != null) {
      pool.close();
    }
    if (server != null) {
      server.stop();
    }
  }

  @Override
  protected KeyStore store() {
    return store;
  }
}
