package dev.idempotency.spring.web;

import dev.idempotency.spring.EmbeddedServers;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Probe (probeV): {@link MvcLateFallbackResolverProbeTest} on a real Redis (embedded, standalone;
 * Spring Data Redis).
 */
class MvcLateFallbackResolverRedisProbeTest extends MvcLateFallbackResolverProbeTest {

  @DynamicPropertySource
  static void redis(DynamicPropertyRegistry registry) {
    registry.add("idempotency.store", () -> "redis");
    registry.add("spring.data.redis.host", () -> "127.0.0.1");
    registry.add("spring.data.redis.port", EmbeddedServers::redisPort);
  }
}
