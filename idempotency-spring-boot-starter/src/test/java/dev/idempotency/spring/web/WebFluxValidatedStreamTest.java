package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.BoundedExchange;
import dev.idempotency.spring.autoconfigure.WebFluxAutoConfigurations;
import dev.idempotency.spring.reactive.NettyServer;
import jakarta.validation.Valid;
import jakarta.validation.constraints.NotBlank;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.WebApplicationType;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RestController;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Issue 39, SPEC 1 and 13 (found by an adversarial probe): a WebFlux {@link IdempotentEndpoint}
 * whose body is a reactive {@code @Valid @RequestBody Flux<Item>} is invoked before its body is
 * decoded and validated: the handler sends each item as it comes, and WebFlux refuses the first
 * invalid item with a {@code WebExchangeBindException} that names the handler's parameter. The
 * items before the invalid one were sent, so that 400 is the handler's answer and is stored (SPEC
 * 13: once the handler method has started); before the fix the filter took it for a refusal before
 * the handler ran and released the key, and the client's retry under the same key sent them again.
 */
class WebFluxValidatedStreamTest {

  private static final HttpClient CLIENT =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

  @Configuration(proxyBeanMethods = false)
  @Import({NettyServer.class, WebFluxAutoConfigurations.class})
  static class ProbeApplication {}

  /** One notification to send. */
  public record Item(@NotBlank String to) {}

  @RestController
  public static class Batch {
    final Map<String, AtomicInteger> sent = new ConcurrentHashMap<>();

    int sent(String to) {
      return sent.computeIfAbsent(to, ignored -> new AtomicInteger()).get();
    }

    /** Sends each item as it is decoded; the count of items sent is the answer. */
    @PostMapping("/batch")
    @IdempotentEndpoint
    public Mono<Map<String, Object>> batch(@Valid @RequestBody Flux<Item> items) {
      return items
          .doOnNext(
              item ->
                  sent.computeIfAbsent(item.to(), ignored -> new AtomicInteger()).incrementAndGet())
          .count()
          .map(count -> Map.of("sent", count));
    }
  }

  private static ConfigurableApplicationContext application;
  private static Batch batch;
  private static int port;

  @BeforeAll
  static void start() {
    SpringApplication builder = new SpringApplication(ProbeApplication.class, Batch.class);
    builder.setWebApplicationType(WebApplicationType.REACTIVE);
    builder.setDefaultProperties(
        Map.of(
            "server.port", "0",
            "server.address", "127.0.0.1",
            "idempotency.store", "memory",
            "spring.main.banner-mode", "off",
            "spring.jmx.enabled", "false"));
    application = builder.run();
    batch = application.getBean(Batch.class);
    port = application.getEnvironment().getRequiredProperty("local.server.port", Integer.class);
  }

  @AfterAll
  static void stop() {
    if (application != null) {
      application.close();
    }
  }

  private static HttpResponse<String> post(String key, String json) throws Exception {
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

  /**
   * A JSON body of several top-level values ({@code {..}\n{..}}, as {@code application/json}),
   * which WebFlux decodes into a {@code Flux<Item>} of all of them, is fingerprinted by all of them
   * (found by an adversarial probe, branch probe39c): another request under the same key whose
   * second value differs is a key reuse ({@code 422}), not a replay of the first request's answer
   * while its own second recipient is never sent to. Before the fix the fingerprint read the first
   * value and ignored the rest.
   */
  @Test
  void aBodyOfConcatenatedJsonValuesIsFingerprintedByAllOfThem() throws Exception {
    String key = "values-" + UUID.randomUUID();
    String a = "a-" + key + "@example.com";
    String b = "b-" + key + "@example.com";
    String c = "c-" + key + "@example.com";

    HttpResponse<String> first = post(key, "{\"to\":\"" + a + "\"}\n{\"to\":\"" + b + "\"}");
    assertThat(first.statusCode()).as(first.body()).isEqualTo(200);
    assertThat(batch.sent(b)).as("WebFlux decodes both values").isEqualTo(1);
    HttpResponse<String> same = post(key, "{\"to\":\"" + a + "\"}\n{\"to\":\"" + b + "\"}");
    assertThat(same.headers().firstValue(IdempotentEndpointWebFilter.REPLAYED_HEADER))
        .as("the same body is still the same request")
        .contains("true");

    HttpResponse<String> other = post(key, "{\"to\":\"" + a + "\"}\n{\"to\":\"" + c + "\"}");

    assertThat(other.statusCode()).as(other.body()).isEqualTo(422);
    assertThat(batch.sent(c)).isZero();
    assertThat(batch.sent(a)).isEqualTo(1);
  }
}
