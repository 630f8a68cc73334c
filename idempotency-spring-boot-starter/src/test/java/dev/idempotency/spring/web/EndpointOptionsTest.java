package dev.idempotency.spring.web;

import static dev.idempotency.spring.web.EndpointClient.header;
import static dev.idempotency.spring.web.EndpointClient.newKey;
import static dev.idempotency.spring.web.EndpointClient.text;
import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.app.NotifyTestApplication;
import io.micrometer.core.instrument.MeterRegistry;
import java.net.http.HttpResponse;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.context.annotation.Bean;

/**
 * What an application sets: keys scoped by what it trusts (an {@link IdempotencyKeyScope} bean,
 * here the client behind an API key), the minimum key length, and an endpoint's operation name.
 */
@SpringBootTest(
    classes = {NotifyTestApplication.class, EndpointOptionsTest.ApiClients.class},
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
    properties = {"idempotency.store=memory", "idempotency.http.min-key-length=8"})
class EndpointOptionsTest extends RunningApplication {

  /** The application knows its clients by API key; it scopes keys by the client, not the secret. */
  @TestConfiguration
  static class ApiClients {
    @Bean
    IdempotencyKeyScope apiClientScope() {
      return request -> {
        String apiKey = request.getHeader("X-Api-Key");
        return apiKey == null ? null : "client-" + apiKey.substring(0, 4);
      };
    }
  }

  static final String BODY = "{\"channel\":\"sms\",\"recipient\":\"+15550100042\"}";

  @Autowired MeterRegistry meters;

  @Test
  void twoApiClientsSendingOneKeyNeverShareARecord() throws Exception {
    String key = newKey();

    HttpResponse<byte[]> acme = post("/notify", key, BODY, "X-Api-Key", "acme-secret-1");
    HttpResponse<byte[]> globex = post("/notify", key, BODY, "X-Api-Key", "glob-secret-2");
    HttpResponse<byte[]> acmeAgain = post("/notify", key, BODY, "X-Api-Key", "acme-secret-1");

    assertThat(acme.statusCode()).isEqualTo(201);
    assertThat(globex.statusCode()).isEqualTo(201);
    assertThat(header(globex, "Idempotent-Replayed")).as("not acme's response").isNull();
    assertThat(globex.body()).isNotEqualTo(acme.body());
    assertThat(header(acmeAgain, "Idempotent-Replayed")).isEqualTo("true");
    assertThat(acmeAgain.body()).isEqualTo(acme.body());
    assertThat(runs()).isEqualTo(2);
  }

  @Test
  void theMinimumKeyLengthIsAProperty() throws Exception {
    String eight = UUID.randomUUID().toString().substring(0, 8);

    HttpResponse<byte[]> seven = post("/notify", eight.substring(1), BODY);
    HttpResponse<byte[]> enough = post("/notify", eight, BODY);

    assertThat(seven.statusCode()).isEqualTo(400);
    assertThat(text(seven)).contains("at least 8 characters");
    assertThat(enough.statusCode()).isEqualTo(201);
  }

  @Test
  void anEndpointsNameIsItsOperationInMetrics() throws Exception {
    String key = newKey();

    post("/campaigns/c_1/launch", key, "");
    post("/campaigns/c_1/launch", key, "");

    assertThat(
            meters
                .get("idempotency.calls")
                .tags("operation", "campaign-launch", "outcome", "sent")
                .counter()
                .count())
        .isEqualTo(1.0);
    assertThat(
            meters
                .get("idempotency.calls")
                .tags("operation", "campaign-launch", "outcome", "replayed")
                .counter()
                .count())
        .isEqualTo(1.0);
    assertThat(runs()).isEqualTo(1);
  }
}
