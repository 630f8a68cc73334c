package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.BoundedExchange;
import dev.idempotency.spring.autoconfigure.WebFluxAutoConfigurations;
import dev.idempotency.spring.reactive.NettyServer;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.WebApplicationType;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.http.MediaType;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;
import reactor.core.publisher.Mono;

/**
 * Probes (issue 39) that held: a WebFlux response body exactly at {@code
 * idempotency.http.max-response-size} is stored and replayed byte for byte; one byte over, it is
 * sent, recorded without its body, and a retry is told so (422) without running the handler again.
 */
class WebFluxResponseBoundTest {

  private static final HttpClient CLIENT =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

  @Configuration(proxyBeanMethods = false)
  @Import({NettyServer.class, WebFluxAutoConfigurations.class})
  static class ProbeApplication {}

  @RestController
  public static class Sized {
    private final AtomicInteger runs = new AtomicInteger();

    int runs() {
      return runs.get();
    }

    @PostMapping(path = "/sized/{size}", produces = MediaType.TEXT_PLAIN_VALUE)
    @IdempotentEndpoint
    public Mono<String> sized(@PathVariable int size) {
      return Mono.fromSupplier(
          () -> {
            runs.incrementAndGet();
            return "x".repeat(size);
          });
    }
  }

  private static ConfigurableApplicationContext application;
  private static Sized sized;
  private static int port;

  @BeforeAll
  static void start() {
    SpringApplication builder = new SpringApplication(ProbeApplication.class, Sized.class);
    builder.setWebApplicationType(WebApplicationType.REACTIVE);
    builder.setDefaultProperties(
        Map.of(
            "server.port", "0",
            "server.address", "127.0.0.1",
            "idempotency.store", "memory",
            "idempotency.http.max-response-size", "1KB",
            "idempotency.in-flight-wait", "100ms",
            "spring.main.banner-mode", "off",
            "spring.jmx.enabled", "false"));
    application = builder.run();
    sized = application.getBean(Sized.class);
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

  @Test
  void aBodyExactlyAtTheBoundIsStoredAndReplayed() throws Exception {
    String key = UUID.randomUUID().toString();
    int before = sized.runs();

    HttpResponse<String> first = post("/sized/1024", key);
    HttpResponse<String> repeat = settled("/sized/1024", key);

    assertThat(first.statusCode()).isEqualTo(200);
    assertThat(first.body()).hasSize(1024);
    assertThat(repeat.statusCode()).isEqualTo(200);
    assertThat(repeat.body()).isEqualTo(first.body());
    assertThat(repeat.headers().firstValue(IdempotentEndpointWebFilter.REPLAYED_HEADER))
        .contains("true");
    assertThat(sized.runs()).isEqualTo(before + 1);
  }

  @Test
  void aBodyOneByteOverTheBoundIsSentOnceAndARetryIsToldItWasNotKept() throws Exception {
    String key = UUID.randomUUID().toString();
    int before = sized.runs();

    HttpResponse<String> first = post("/sized/1025", key);
    HttpResponse<String> repeat = settled("/sized/1025", key);

    assertThat(first.statusCode()).isEqualTo(200);
    assertThat(first.body()).hasSize(1025);
    assertThat(repeat.statusCode()).isEqualTo(422);
    assertThat(repeat.body()).contains("response-not-stored");
    assertThat(sized.runs()).isEqualTo(before + 1);
  }
}
