package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.KeyStoreException;
import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spring.app.NotifyController;
import dev.idempotency.spring.app.NotifyTestApplication;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.context.annotation.Bean;

/**
 * The application's own {@link KeyStore} bean wins over the auto-configured one; while it cannot
 * answer, an idempotent endpoint answers 503 with {@code Retry-After} and runs nothing, and answers
 * again once the store is back.
 */
@SpringBootTest(
    classes = {NotifyTestApplication.class, StoreDownEndpointTest.OwnStore.class},
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class StoreDownEndpointTest {

  /** The application's store: an in-memory one that can be made to fail, like a stopped server. */
  static final class SwitchableStore implements KeyStore {
    final AtomicBoolean down = new AtomicBoolean();
    private final KeyStore delegate = InMemoryKeyStore.builder().build();

    private void check() {
      if (down.get()) {
        throw new KeyStoreException("the store is down (test)", null);
      }
    }

    @Override
    public ClaimResult claim(ClaimRequest request) {
      check();
      return delegate.claim(request);
    }

    @Override
    public boolean complete(CompleteRequest request) {
      check();
      return delegate.complete(request);
    }

    @Override
    public boolean release(String keyId, String ownerToken) {
      check();
      return delegate.release(keyId, ownerToken);
    }

    @Override
    public boolean extend(ExtendRequest request) {
      check();
      return delegate.extend(request);
    }
  }

  @TestConfiguration
  static class OwnStore {
    @Bean
    SwitchableStore switchableStore() {
      return new SwitchableStore();
    }
  }

  @LocalServerPort int port;
  @Autowired SwitchableStore store;
  @Autowired KeyStore keyStore;
  @Autowired NotifyController controller;

  HttpResponse<String> post(String key) throws Exception {
    return HttpClient.newHttpClient()
        .send(
            HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/notify"))
                .header("Content-Type", "application/json")
                .header("Idempotency-Key", key)
                .POST(HttpRequest.BodyPublishers.ofString("{\"channel\":\"sms\"}"))
                .build(),
            HttpResponse.BodyHandlers.ofString());
  }

  @Test
  void whileTheStoreIsDownTheEndpointAnswers503AndRunsNothing() throws Exception {
    assertThat(keyStore).as("the application's bean wins").isSameAs(store);
    int before = controller.runs();
    String key = UUID.randomUUID().toString();

    store.down.set(true);
    HttpResponse<String> down = post(key);
    store.down.set(false);
    HttpResponse<String> back = post(key);

    assertThat(down.statusCode()).isEqualTo(503);
    assertThat(down.headers().firstValue("Retry-After")).hasValue("5");
    assertThat(down.headers().firstValue("Content-Type")).hasValue("application/problem+json");
    assertThat(down.body()).contains("/problems/store-unavailable").contains("\"status\":503");
    assertThat(back.statusCode()).isEqualTo(201);
    assertThat(controller.runs() - before).as("only the request after the outage ran").isEqualTo(1);
  }
}
