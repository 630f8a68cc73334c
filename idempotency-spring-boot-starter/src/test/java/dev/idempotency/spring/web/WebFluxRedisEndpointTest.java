package dev.idempotency.spring.web;

import dev.idempotency.redis.RedisKeyStore;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spring.EmbeddedServers;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/** The endpoint cases on WebFlux and Redis, through Spring Data Redis's Lettuce connection. */
class WebFluxRedisEndpointTest extends WebFluxEndpointContract {

  @DynamicPropertySource
  static void stores(DynamicPropertyRegistry registry) {
    registry.add("idempotency.store", () -> "redis");
    registry.add("spring.data.redis.host", () -> "127.0.0.1");
    registry.add("spring.data.redis.port", EmbeddedServers::redisPort);
  }

  @Override
  Class<? extends KeyStore> expectedStore() {
    return RedisKeyStore.class;
  }
}
