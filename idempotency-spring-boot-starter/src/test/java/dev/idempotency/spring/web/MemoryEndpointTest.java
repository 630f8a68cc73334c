package dev.idempotency.spring.web;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.KeyStore;
import org.springframework.test.context.TestPropertySource;

/** The endpoint contract in memory. */
@TestPropertySource(properties = "idempotency.store=memory")
class MemoryEndpointTest extends EndpointContract {
  @Override
  Class<? extends KeyStore> expectedStore() {
    return InMemoryKeyStore.class;
  }
}
