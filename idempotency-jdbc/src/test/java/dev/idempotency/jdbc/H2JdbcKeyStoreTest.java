package dev.idempotency.jdbc;

import com.zaxxer.hikari.HikariDataSource;
import javax.sql.DataSource;
import org.h2.tools.Server;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/** The contract on H2 2.x, served over TCP so that a second JVM can race on the same database. */
class H2JdbcKeyStoreTest extends JdbcKeyStoreContract {

  private Server server;
  private String url;
  private HikariDataSource dataSource;

  @BeforeAll
  void startH2() throws Exception {
    server = Server.createTcpServer("-tcpPort", "0", "-ifNotExists").start();
    url = "jdbc:h2:tcp://localhost:" + server.getPort() + "/mem:idem;DB_CLOSE_DELAY=-1";
    dataSource = Pools.of(url, Pools.CONTRACT_SIZE);
  }

  @AfterAll
  void stopH2() {
    if (dataSource != null) {
      dataSource.close();
    }
    if (server != null) {
      server.stop();
    }
  }

  @Override
  DataSource dataSource() {
    return dataSource;
  }

  @Override
  String jdbcUrl() {
    return url;
  }

  @Override
  JdbcDialect expectedDialect() {
    return JdbcDialect.H2;
  }
}
