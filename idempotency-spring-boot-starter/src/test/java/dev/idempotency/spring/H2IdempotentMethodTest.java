package dev.idempotency.spring;

import org.springframework.test.context.TestPropertySource;

/** The {@link Idempotent} contract on the JDBC store, on H2. */
@TestPropertySource(properties = "spring.datasource.url=jdbc:h2:mem:methods;DB_CLOSE_DELAY=-1")
class H2IdempotentMethodTest extends IdempotentMethodContract {
  @Override
  String storeKind() {
    return "jdbc";
  }
}
