package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.BoundedExchange;
import dev.idempotency.spring.autoconfigure.WebFluxAutoConfigurations;
import dev.idempotency.spring.reactive.NettyServer;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.WebApplicationType;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.http.server.reactive.ServerHttpResponse;
import org.springframework.stereotype.Controller;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.reactive.result.view.Rendering;
import reactor.core.publisher.Mono;

/**
 * Probes (issue 39) that held: WebFlux handlers that write or complete their response themselves
 * instead of returning a body, now that the filter completes a response nobody wrote. Each is
 * answered once, stored, and replayed byte for byte with {@code Idempotent-Replayed: true}; the
 * handler runs once.
 */
class WebFluxSelfWrittenResponseTest {

  private static final HttpClient CLIENT =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

  @Configuration(proxyBeanMethods = false)
  @Import({NettyServer.class, WebFluxAutoConfigurations.class})
  static class ProbeApplication {}

  @Controller
  public static class SelfWritten {
    private final AtomicInteger runs = new AtomicInteger();

    int runs() {
      return runs.get();
    }

    /** Writes its own body through the response parameter. */
    @PostMapping("/self/write-with")
    @IdempotentEndpoint
    public Mono<Void> writeWith(ServerHttpResponse response) {
      return Mono.defer(
          () -> {
            int n = runs.incrementAndGet();
            response.setStatusCode(HttpStatus.CREATED);
            response.getHeaders().setContentType(MediaType.TEXT_PLAIN);
            byte[] body = ("sent " + n).getBytes(StandardCharsets.UTF_8);
            return response.writeWith(Mono.fromSupplier(() -> response.bufferFactory().wrap(body)));
          });
    }

    /** Sets a status and completes the response itself. */
    @PostMapping("/self/set-complete")
    @IdempotentEndpoint
    public Mono<Void> setComplete(ServerHttpResponse response) {
      return Mono.defer(
          () -> {
            response.setStatusCode(HttpStatus.ACCEPTED);
            response.getHeaders().set("Location", "/n/" + runs.incrementAndGet());
            return response.setComplete();
          });
    }

    /** Redirects through a {@code Rendering}. */
    @PostMapping("/self/rendering")
    @IdempotentEndpoint
    public Mono<Rendering> rendering() {
      return Mono.fromSupplier(
          () -> Rendering.redirectTo("/notifications/" + runs.incrementAndGet()).build());
    }
  }

  private static ConfigurableApplicationContext application;
  private static SelfWritten handlers;
  private static int port;

  @BeforeAll
  static void start() {
    SpringApplication builder = new SpringApplication(ProbeApplication.class, SelfWritten.class);
    builder.setWebApplicationType(WebApplicationType.REACTIVE);
    builder.setDefaultProperties(
        Map.of(
            "server.port", "0",
            "server.address", "127.0.0.1",
            "idempotency.store", "memory",
            "idempotency.in-flight-wait", "100ms",
            "spring.main.banner-mode", "off",
            "spring.jmx.enabled", "false"));
    application = builder.run();
    handlers = application.getBean(SelfWritten.class);
    port = application.getEnvironment().getRequiredProperty("local.server.port", Integer.class);
  }

  @AfterAll
  static void stop() {
    if (application != null) {
      application.close();
    }
  }

  private static HttpResponse<String> post(String path, String key) throws Exception {
    return BoundedExchange.send(
        CLIENT,
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
            .timeout(Duration.ofSeconds(30))
            .header("Idempotency-Key", key)
            .POST(HttpRequest.BodyPublishers.noBody())
            .build(),
        HttpResponse.BodyHandlers.ofString());
  }

  /** A repeat, once the first answer is recorded (a repeat before it is told 409; bounded). */
  private static HttpResponse<String> settled(String path, String key) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    HttpResponse<String> repeat = post(path, key);
    while (repeat.statusCode() == 409 && System.nanoTime() < deadline) {
      Thread.sleep(20);
      repeat = post(path, key);
    }
    return repeat;
  }

  @ParameterizedTest
  @ValueSource(strings = {"/self/write-with", "/self/set-complete", "/self/rendering"})
  void aResponseTheHandlerWroteOrCompletedItselfIsStoredAndReplayed(String path) throws Exception {
    String key = "self-" + UUID.randomUUID();
    int before = handlers.runs();

    HttpResponse<String> first = post(path, key);
    HttpResponse<String> repeat = settled(path, key);

    assertThat(first.statusCode()).isBetween(200, 399);
    assertThat(handlers.runs()).isEqualTo(before + 1);
    assertThat(repeat.statusCode()).isEqualTo(first.statusCode());
    assertThat(repeat.body()).isEqualTo(first.body());
    assertThat(repeat.headers().firstValue("Location"))
        .isEqualTo(first.headers().firstValue("Location"));
    assertThat(repeat.headers().firstValue(IdempotentEndpointWebFilter.REPLAYED_HEADER))
        .contains("true");
  }
}
