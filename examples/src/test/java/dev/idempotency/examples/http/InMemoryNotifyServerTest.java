package dev.idempotency.examples.http;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.ObservedKeyStore;
import java.net.http.HttpResponse;
import java.time.Duration;
import org.junit.jupiter.api.Test;

class InMemoryNotifyServerTest extends NotifyServerContract {

  final ObservedKeyStore store = new ObservedKeyStore(InMemoryKeyStore.builder().build());

  @Override
  KeyStore store() {
    return store;
  }

  @Test
  void storeUnavailableIs503AndSendsNothing() throws Exception {
    server(Duration.ofSeconds(2));
    store.failClaims.set(1);

    HttpResponse<String> response = post(newKey(), SMS_BODY);

    assertThat(response.statusCode()).isEqualTo(503);
    assertThat(response.headers().firstValue("Retry-After")).isPresent();
    assertThat(response.body()).contains("nothing was sent");
    assertThat(server.sms.requests()).isZero();
  }
}
