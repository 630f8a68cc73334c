package dev.idempotency.spring.web;

import dev.idempotency.jdbc.JdbcKeyStore;
import dev.idempotency.spi.KeyStore;
import javax.sql.DataSource;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.test.context.TestPropertySource;

/** {@link StoreLimitContract} on the JDBC store, on H2. */
@TestPropertySource(properties = "spring.datasource.url=jdbc:h2:mem:limits;DB_CLOSE_DELAY=-1")
@Import(H2StoreLimitTest.SmallStore.class)
class H2StoreLimitTest extends StoreLimitContract {

  @TestConfiguration
  static class SmallStore {
    @Bean
    KeyStore smallJdbcStore(DataSource dataSource) {
      return JdbcKeyStore.builder(dataSource)
          .createSchemaIfMissing(true)
          .maxPayloadBytes(STORE_LIMIT)
          .build();
    }
  }
}
