package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.BoundedExchange;
import dev.idempotency.spring.fluxapp.FluxEndpointApplication;
import dev.idempotency.spring.reactive.NettyServer;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.context.annotation.Import;

/**
 * {@link WebFluxValidatedStreamTest}'s second send, in the WebFlux test application (Boot's whole
 * auto-configuration, its error handler included) on a real store: a batch refused midway by
 * {@code @Valid} on a {@code Flux} body is released though its first items were sent, and the retry
 * under the same key sends them again. Subclasses name the store.
 */
@SpringBootTest(
    classes = {FluxEndpointApplication.class, WebFluxValidatedStreamTest.Batch.class},
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
    properties = "spring.main.web-application-type=reactive")
@Import(NettyServer.class)
abstract class WebFluxValidatedStreamContract {

  private static final HttpClient CLIENT =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

  @LocalServerPort int port;
  @Autowired WebFluxValidatedStreamTest.Batch batch;

  private HttpResponse<String> post(String key, String json) throws Exception {
    return BoundedExchange.send(
        CLIENT,
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/batch"))
            .timeout(Duration.ofSeconds(30))
            .header("Idempotency-Key", key)
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(json))
            .build(),
        HttpResponse.BodyHandlers.ofString());
  }

  @Test
  void aRetryOfABatchRefusedMidwayDoesNotSendItsFirstItemsAgain() throws Exception {
    String key = "batch-" + UUID.randomUUID();
    String to = "first-" + UUID.randomUUID() + "@example.com";
    String json = "[{\"to\":\"" + to + "\"},{\"to\":\"\"}]";

    HttpResponse<String> first = post(key, json);
    assertThat(first.statusCode()).isEqualTo(400);
    assertThat(batch.sent(to)).as("the handler ran and sent the first item").isEqualTo(1);

    HttpResponse<String> retry = post(key, json);

    assertThat(batch.sent(to))
        .as("the same request under the same key must not send the first item again")
        .isEqualTo(1);
    assertThat(retry.statusCode()).isEqualTo(400);
    assertThat(retry.headers().firstValue(IdempotentEndpointWebFilter.REPLAYED_HEADER))
        .contains("true");
  }
}
