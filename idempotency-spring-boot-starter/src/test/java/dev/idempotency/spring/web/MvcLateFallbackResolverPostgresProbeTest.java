package dev.idempotency.spring.web;

import dev.idempotency.spring.EmbeddedServers;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/** Probe (probeV): {@link MvcLateFallbackResolverProbeTest} on a real PostgreSQL (embedded). */
class MvcLateFallbackResolverPostgresProbeTest extends MvcLateFallbackResolverProbeTest {

  @DynamicPropertySource
  static void postgres(DynamicPropertyRegistry registry) {
    registry.add("idempotency.store", () -> "jdbc");
    registry.add("spring.datasource.url", EmbeddedServers::postgresUrl);
    registry.add("idempotency.jdbc.initialize-schema", () -> "always");
  }
}
