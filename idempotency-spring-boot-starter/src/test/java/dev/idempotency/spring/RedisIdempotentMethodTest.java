package dev.idempotency.spring;

import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/** The {@link Idempotent} contract on Redis, through Spring Data Redis's Lettuce connection. */
class RedisIdempotentMethodTest extends IdempotentMethodContract {

  @DynamicPropertySource
  static void redis(DynamicPropertyRegistry registry) {
    registry.add("idempotency.store", () -> "redis");
    registry.add("spring.data.redis.host", () -> "127.0.0.1");
    registry.add("spring.data.redis.port", EmbeddedServers::redisPort);
  }

  @Override
  String storeKind() {
    return "redis";
  }
}
