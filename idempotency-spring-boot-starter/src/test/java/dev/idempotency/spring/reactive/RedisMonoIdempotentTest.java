package dev.idempotency.spring.reactive;

import dev.idempotency.spring.EmbeddedServers;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/** The {@code Mono} contract on Redis, through its asynchronous API. */
class RedisMonoIdempotentTest extends MonoIdempotentContract {

  @DynamicPropertySource
  static void redis(DynamicPropertyRegistry registry) {
    registry.add("idempotency.store", () -> "redis");
    registry.add("spring.data.redis.host", () -> "127.0.0.1");
    registry.add("spring.data.redis.port", EmbeddedServers::redisPort);
  }
}
