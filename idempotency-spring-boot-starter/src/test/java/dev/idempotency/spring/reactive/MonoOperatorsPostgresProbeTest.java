package dev.idempotency.spring.reactive;

import dev.idempotency.spring.EmbeddedServers;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The operator probes (issue 39) on PostgreSQL with a pool of two connections, fewer than the
 * cancel test's forty keys at once: the store's calls wait on the guard's bounded executor, never
 * on a Reactor thread.
 */
class MonoOperatorsPostgresProbeTest extends MonoOperatorsProbeContract {

  @DynamicPropertySource
  static void postgres(DynamicPropertyRegistry registry) {
    registry.add("spring.datasource.url", EmbeddedServers::postgresUrl);
    registry.add("spring.datasource.hikari.maximum-pool-size", () -> "2");
    registry.add("idempotency.jdbc.initialize-schema", () -> "always");
  }
}
