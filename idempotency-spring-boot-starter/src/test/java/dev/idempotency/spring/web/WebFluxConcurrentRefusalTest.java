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
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.WebApplicationType;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.bind.annotation.RestControllerAdvice;
import org.springframework.web.bind.support.WebExchangeBindException;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * Issue 39, SPEC 13: a WebFlux {@link IdempotentEndpoint} request refused by validation before its
 * handler ran is released, not stored, so that the client's corrected retry under the same key
 * runs. When the application's own {@code @RestControllerAdvice} answers the refusal, the filter
 * sees no error and relies on {@link IdempotentEndpointInvocations} alone; when that counted every
 * invocation of the method, another client's valid request to the same method in between made the
 * refusal look invoked, and the 400 was stored: the corrected retry was refused 422 (fingerprint
 * mismatch) for the whole window. The advice here waits for the test, so "in between" is a fact,
 * not a race the test hopes to win.
 */
class WebFluxConcurrentRefusalTest {

  private static final HttpClient CLIENT =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

  @Configuration(proxyBeanMethods = false)
  @Import({NettyServer.class, WebFluxAutoConfigurations.class})
  static class ProbeApplication {}

  /** One notification to send. */
  public record Order(@NotBlank String to) {}

  @RestController
  public static class Orders {
    private final AtomicInteger sent = new AtomicInteger();

    int sent() {
      return sent.get();
    }

    @PostMapping("/orders")
    @IdempotentEndpoint
    public Mono<Map<String, Object>> order(@Valid @RequestBody Order order) {
      return Mono.fromSupplier(() -> Map.of("to", order.to(), "n", sent.incrementAndGet()));
    }

    @PostMapping("/notes")
    @IdempotentEndpoint(required = false)
    public Mono<Map<String, Object>> note(@Valid @RequestBody Order order) {
      return Mono.fromSupplier(() -> Map.of("to", order.to(), "n", sent.incrementAndGet()));
    }
  }

  /** Answers validation refusals itself, once the test lets it. */
  @RestControllerAdvice
  public static class SlowRefusals {
    volatile CountDownLatch entered = new CountDownLatch(1);
    volatile Sinks.Empty<Void> open = Sinks.empty();

    @ExceptionHandler(WebExchangeBindException.class)
    public Mono<ResponseEntity<Map<String, Object>>> refused(WebExchangeBindException refusal) {
      Sinks.Empty<Void> gate = open;
      entered.countDown();
      return gate.asMono()
          .then(
              Mono.fromSupplier(
                  () -> ResponseEntity.badRequest().body(Map.of("error", "invalid"))));
    }
  }

  private static ConfigurableApplicationContext application;
  private static Orders orders;
  private static SlowRefusals refusals;
  private static int port;

  @BeforeAll
  static void start() {
    SpringApplication builder =
        new SpringApplication(ProbeApplication.class, Orders.class, SlowRefusals.class);
    builder.setWebApplicationType(WebApplicationType.REACTIVE);
    builder.setDefaultProperties(
        Map.of(
            "server.port", "0",
            "server.address", "127.0.0.1",
            "idempotency.store", "memory",
            "spring.main.banner-mode", "off",
            "spring.jmx.enabled", "false"));
    application = builder.run();
    orders = application.getBean(Orders.class);
    refusals = application.getBean(SlowRefusals.class);
    port = application.getEnvironment().getRequiredProperty("local.server.port", Integer.class);
  }

  @AfterAll
  static void stop() {
    if (application != null) {
      application.close();
    }
  }

  private static HttpRequest post(String key, String json) {
    return post("/orders", key, json);
  }

  private static HttpRequest post(String path, @Nullable String key, String json) {
    HttpRequest.Builder request =
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
            .timeout(Duration.ofSeconds(30))
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(json));
    if (key != null) {
      request.header("Idempotency-Key", key);
    }
    return request.build();
  }

  @BeforeEach
  void closeTheGate() {
    refusals.entered = new CountDownLatch(1);
    refusals.open = Sinks.empty();
  }

  /** The control, which holds: with no other request in between, the refusal is released. */
  @Test
  void aRefusalAnsweredByAnAdviceIsReleased() throws Exception {
    String key = "refused-" + UUID.randomUUID();
    refusals.open.tryEmitEmpty();
    HttpResponse<String> refused =
        BoundedExchange.send(
            CLIENT, post(key, "{\"to\":\"\"}"), HttpResponse.BodyHandlers.ofString());
    assertThat(refused.statusCode()).isEqualTo(400);
    int sentBefore = orders.sent();

    HttpResponse<String> corrected =
        BoundedExchange.send(
            CLIENT, post(key, "{\"to\":\"a@example.com\"}"), HttpResponse.BodyHandlers.ofString());

    assertThat(corrected.statusCode()).as(corrected.body()).isEqualTo(200);
    assertThat(orders.sent()).isEqualTo(sentBefore + 1);
  }

  /**
   * Another client's request to the same handler method, invoked while the refusal waits in the
   * advice, is that request's invocation, not the refusal's: the refusal is still released.
   */
  @Test
  void aRefusalAnsweredByAnAdviceWhileAnotherRequestRunsIsReleased() throws Exception {
    String key = "refused-" + UUID.randomUUID();
    CompletableFuture<HttpResponse<String>> refused =
        CLIENT.sendAsync(post(key, "{\"to\":\"\"}"), HttpResponse.BodyHandlers.ofString());
    assertThat(refusals.entered.await(30, TimeUnit.SECONDS)).isTrue();

    HttpResponse<String> other =
        BoundedExchange.send(
            CLIENT,
            post("other-" + UUID.randomUUID(), "{\"to\":\"b@example.com\"}"),
            HttpResponse.BodyHandlers.ofString());
    assertThat(other.statusCode()).isEqualTo(200);
    refusals.open.tryEmitEmpty();
    assertThat(refused.get(30, TimeUnit.SECONDS).statusCode()).isEqualTo(400);
    int sentBefore = orders.sent();

    HttpResponse<String> corrected =
        BoundedExchange.send(
            CLIENT, post(key, "{\"to\":\"a@example.com\"}"), HttpResponse.BodyHandlers.ofString());

    assertThat(corrected.statusCode())
        .as("the corrected retry under the key of a refusal runs: %s", corrected.body())
        .isEqualTo(200);
    assertThat(orders.sent()).isEqualTo(sentBefore + 1);
  }

  /**
   * A request without a key to an endpoint that requires none runs unguarded; its invocation, while
   * a guarded request to the same method waits in the advice, is not the refusal's either.
   */
  @Test
  void aRefusalAnsweredByAnAdviceWhileAnUnguardedRequestRunsIsReleased() throws Exception {
    String key = "refused-" + UUID.randomUUID();
    CompletableFuture<HttpResponse<String>> refused =
        CLIENT.sendAsync(
            post("/notes", key, "{\"to\":\"\"}"), HttpResponse.BodyHandlers.ofString());
    assertThat(refusals.entered.await(30, TimeUnit.SECONDS)).isTrue();

    HttpResponse<String> unguarded =
        BoundedExchange.send(
            CLIENT,
            post("/notes", null, "{\"to\":\"b@example.com\"}"),
            HttpResponse.BodyHandlers.ofString());
    assertThat(unguarded.statusCode()).isEqualTo(200);
    refusals.open.tryEmitEmpty();
    assertThat(refused.get(30, TimeUnit.SECONDS).statusCode()).isEqualTo(400);
    int sentBefore = orders.sent();

    HttpResponse<String> corrected =
        BoundedExchange.send(
            CLIENT,
            post("/notes", key, "{\"to\":\"a@example.com\"}"),
            HttpResponse.BodyHandlers.ofString());

    assertThat(corrected.statusCode())
        .as("the corrected retry under the key of a refusal runs: %s", corrected.body())
        .isEqualTo(200);
    assertThat(orders.sent()).isEqualTo(sentBefore + 1);
  }
}
