package dev.idempotency.spring.web;

import dev.idempotency.jdbc.JdbcKeyStore;
import dev.idempotency.spi.KeyStore;
import org.springframework.test.context.TestPropertySource;

/** The endpoint contract on the JDBC store, on H2 (chosen by auto, the table created). */
@TestPropertySource(properties = "spring.datasource.url=jdbc:h2:mem:endpoints;DB_CLOSE_DELAY=-1")
class H2EndpointTest extends EndpointContract {
  @Override
  Class<? extends KeyStore> expectedStore() {
    return JdbcKeyStore.class;
  }
}
