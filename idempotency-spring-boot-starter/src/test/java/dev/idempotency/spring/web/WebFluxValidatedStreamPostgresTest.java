package dev.idempotency.spring.web;

import dev.idempotency.spring.EmbeddedServers;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/** {@link WebFluxValidatedStreamContract} on PostgreSQL (embedded PostgreSQL server). */
class WebFluxValidatedStreamPostgresTest extends WebFluxValidatedStreamContract {

  @DynamicPropertySource
  static void stores(DynamicPropertyRegistry registry) {
    registry.add("idempotency.store", () -> "jdbc");
    registry.add("spring.datasource.url", EmbeddedServers::postgresUrl);
    registry.add("idempotency.jdbc.initialize-schema", () -> "always");
  }
}
