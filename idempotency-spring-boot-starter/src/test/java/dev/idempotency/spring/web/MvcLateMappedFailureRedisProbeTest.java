package dev.idempotency.spring.web;

import dev.idempotency.spring.EmbeddedServers;
import org.junit.jupiter.api.Tag;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/** probeE: {@link MvcLateMappedFailureProbeTest} on a real Redis (embedded, standalone). */
// passes; outside CI's time budget (docs/guarantees.md, "Tests outside the default build"): six
// timed-out requests of about 2 s each, the same cases as MvcLateMappedFailureProbeTest, which
// stays in the default build
@Tag("extended")
class MvcLateMappedFailureRedisProbeTest extends MvcLateMappedFailureProbeTest {

  @DynamicPropertySource
  static void redis(DynamicPropertyRegistry registry) {
    registry.add("idempotency.store", () -> "redis");
    registry.add("spring.data.redis.host", () -> "127.0.0.1");
    registry.add("spring.data.redis.port", EmbeddedServers::redisPort);
  }
}
