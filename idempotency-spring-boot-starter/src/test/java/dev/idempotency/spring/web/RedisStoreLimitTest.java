package dev.idempotency.spring.web;

import dev.idempotency.redis.RedisKeyStore;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spring.EmbeddedServers;
import io.lettuce.core.RedisClient;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;

/** {@link StoreLimitContract} on Redis. */
@Import(RedisStoreLimitTest.SmallStore.class)
class RedisStoreLimitTest extends StoreLimitContract {

  @TestConfiguration
  static class SmallStore {
    @Bean(destroyMethod = "shutdown")
    RedisClient limitsRedisClient() {
      return RedisClient.create("redis://127.0.0.1:" + EmbeddedServers.redisPort());
    }

    @Bean
    KeyStore smallRedisStore(RedisClient limitsRedisClient) {
      return RedisKeyStore.builder(limitsRedisClient)
          .keyPrefix("limits:")
          .maxPayloadBytes(STORE_LIMIT)
          .build();
    }
  }
}
