package dev.idempotency.spring.web;

import dev.idempotency.jdbc.JdbcKeyStore;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spring.EmbeddedServers;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The endpoint cases on WebFlux and PostgreSQL (chosen by auto beside Redis): the JDBC store's
 * blocking calls run on the guard's own executor, which BlockHound proves by failing any blocking
 * call of the SDK on a Netty event loop.
 */
class WebFluxPostgresEndpointTest extends WebFluxEndpointContract {

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
