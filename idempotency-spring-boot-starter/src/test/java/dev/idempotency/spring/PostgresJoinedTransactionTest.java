package dev.idempotency.spring;

import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/** The joined-transaction contract on a real PostgreSQL 17 (embedded). */
class PostgresJoinedTransactionTest extends JoinedTransactionContract {

  @DynamicPropertySource
  static void postgres(DynamicPropertyRegistry registry) {
    registry.add("spring.datasource.url", EmbeddedServers::postgresUrl);
    registry.add("idempotency.jdbc.initialize-schema", () -> "always");
  }
}
