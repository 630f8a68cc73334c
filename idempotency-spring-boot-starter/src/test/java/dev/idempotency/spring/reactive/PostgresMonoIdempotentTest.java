package dev.idempotency.spring.reactive;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.jdbc.JdbcKeyStore;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spring.EmbeddedServers;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The {@code Mono} contract on PostgreSQL: a blocking store, whose calls run on the guard's own
 * bounded executor, so that BlockHound finds no blocking call on Reactor's {@code parallel}
 * threads.
 */
class PostgresMonoIdempotentTest extends MonoIdempotentContract {

  @DynamicPropertySource
  static void postgres(DynamicPropertyRegistry registry) {
    registry.add("spring.datasource.url", EmbeddedServers::postgresUrl);
    registry.add("idempotency.jdbc.initialize-schema", () -> "always");
  }

  @Autowired KeyStore store;

  @Test
  void theStoreIsJdbc() {
    assertThat(store).isInstanceOf(JdbcKeyStore.class);
  }
}
