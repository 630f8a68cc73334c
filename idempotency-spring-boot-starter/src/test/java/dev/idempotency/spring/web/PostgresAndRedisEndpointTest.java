package dev.idempotency.spring.web;

import dev.idempotency.jdbc.JdbcKeyStore;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spring.EmbeddedServers;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The endpoint contract on PostgreSQL, in an application that has both a DataSource (PostgreSQL)
 * and Redis (Spring Data Redis): {@code idempotency.store=auto} chooses JDBC.
 */
class PostgresAndRedisEndpointTest extends EndpointContract {

  @DynamicPropertySource
  static void stores(DynamicPropertyRegistry registry) {
    registry.add("spring.datasource.url", EmbeddedServers::postgresUrl);
    registry.add("idempotency.jdbc.initialize-schema", () -> "always");
    registry.add("spring.data.redis.host", () -> "127.0.0.1");
    registry.add("spring.data.redis.port", EmbeddedServers::redisPort);
  }

  @Override
  Class<? extends KeyStore> expectedStore() {
    return JdbcKeyStore.class;
  }
}
