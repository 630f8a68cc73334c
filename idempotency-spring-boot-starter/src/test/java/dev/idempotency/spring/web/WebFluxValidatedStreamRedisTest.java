package dev.idempotency.spring.web;

import dev.idempotency.spring.EmbeddedServers;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/** {@link WebFluxValidatedStreamContract} on Redis (embedded Redis server). */
class WebFluxValidatedStreamRedisTest extends WebFluxValidatedStreamContract {

  @DynamicPropertySource
  static void stores(DynamicPropertyRegistry registry) {
    registry.add("idempotency.store", () -> "redis");
    registry.add("spring.data.redis.host", () -> "127.0.0.1");
    registry.add("spring.data.redis.port", EmbeddedServers::redisPort);
  }
}
