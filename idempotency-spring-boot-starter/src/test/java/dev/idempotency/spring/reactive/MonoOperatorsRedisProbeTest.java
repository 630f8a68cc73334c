package dev.idempotency.spring.reactive;

import dev.idempotency.spring.EmbeddedServers;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/** The operator probes (issue 39) on Redis, whose store answers on Lettuce's event loop. */
class MonoOperatorsRedisProbeTest extends MonoOperatorsProbeContract {

  @DynamicPropertySource
  static void redis(DynamicPropertyRegistry registry) {
    registry.add("idempotency.store", () -> "redis");
    registry.add("spring.data.redis.host", () -> "127.0.0.1");
    registry.add("spring.data.redis.port", EmbeddedServers::redisPort);
  }
}
