package dev.idempotency.spring.web;

import static dev.idempotency.spring.web.EndpointClient.newKey;
import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.KeyStore;
import java.net.http.HttpResponse;
import org.junit.jupiter.api.Test;
import org.springframework.test.context.TestPropertySource;

/** The endpoint contract in memory. */
@TestPropertySource(properties = "idempotency.store=memory")
class MemoryEndpointTest extends EndpointContract {
  @Override
  Class<? extends KeyStore> expectedStore() {
    return InMemoryKeyStore.class;
  }

  /**
   * Issue 39: a controller validated by Spring AOP (class-level {@code @Validated}) refuses inside
   * its proxy, before the method body; the endpoint's advisor must see the method start only past
   * that refusal (it is the innermost advice), so the 400 is not stored and the corrected retry
   * under the same key runs. Before the fix the 400 was stored and the retry got 422.
   */
  @Test
  void aRefusalOfAValidatedControllerIsNotStored() throws Exception {
    String key = newKey();

    HttpResponse<byte[]> refused = post("/notices/validated?to=not-an-email", key, "");
    assertThat(refused.statusCode()).isEqualTo(400);
    HttpResponse<byte[]> corrected = post("/notices/validated?to=a@example.com", key, "");

    assertThat(corrected.statusCode())
        .as("the corrected retry under the same key runs: %s", EndpointClient.text(corrected))
        .isEqualTo(200);
    assertThat(runs()).isEqualTo(1);
  }
}
