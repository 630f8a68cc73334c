package dev.idempotency.spring.web;

import dev.idempotency.spring.EmbeddedServers;
import org.junit.jupiter.api.Tag;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/** probeE: {@link MvcLateMappedFailureProbeTest} on a real PostgreSQL (embedded). */
// passes; outside CI's time budget (docs/guarantees.md, "Tests outside the default build"): six
// timed-out requests of about 2 s each, the same cases as MvcLateMappedFailureProbeTest, which
// stays in the default build
@Tag("extended")
class MvcLateMappedFailurePostgresProbeTest extends MvcLateMappedFailureProbeTest {

  @DynamicPropertySource
  static void postgres(DynamicPropertyRegistry registry) {
    registry.add("idempotency.store", () -> "jdbc");
    registry.add("spring.datasource.url", EmbeddedServers::postgresUrl);
    registry.add("idempotency.jdbc.initialize-schema", () -> "always");
  }
}
