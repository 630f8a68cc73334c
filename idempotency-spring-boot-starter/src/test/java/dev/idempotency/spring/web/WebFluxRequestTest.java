package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.BoundedExchange;
import dev.idempotency.spring.autoconfigure.WebFluxAutoConfigurations;
import dev.idempotency.spring.reactive.NettyServer;
import jakarta.validation.ConstraintViolationException;
import jakarta.validation.constraints.Email;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.WebApplicationType;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.core.Ordered;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.validation.annotation.Validated;
import org.springframework.validation.beanvalidation.MethodValidationPostProcessor;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.server.WebFilter;
import reactor.core.publisher.Mono;

/**
 * What a WebFlux {@code IdempotentEndpoint} takes for its request and for a refusal before the
 * handler ran, when other parts of the application stand between the endpoint's filter and the
 * handler method (issue 39, SPEC 1, 13 and 18; found by the adversarial probes of branch probe39c),
 * over real HTTP on Reactor Netty, in-memory store: a later filter that answers itself, a later
 * filter that rewrites the path to a guarded handler, and a controller validated by Spring AOP.
 */
class WebFluxRequestTest {

  private static final HttpClient CLIENT =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();
  private static final long WAIT_SECONDS = 30;

  @Configuration(proxyBeanMethods = false)
  @Import({NettyServer.class, WebFluxAutoConfigurations.class})
  static class RequestApplication {

    /** Class-level {@code @Validated}, as Boot's validation auto-configuration registers it. */
    @Bean
    static MethodValidationPostProcessor methodValidationPostProcessor() {
      return new MethodValidationPostProcessor();
    }

    /**
     * A filter after the endpoint's (no order: lowest precedence) that answers some requests
     * itself, with a 200, without calling the handler (a maintenance page, a response cache).
     */
    @Bean
    WebFilter shortCircuit() {
      return new ShortCircuit();
    }

    /**
     * An application's filter with no order (lowest precedence, so after the endpoint's) that
     * serves an old path by rewriting it to the new one (an API prefix or version kept for old
     * clients).
     */
    @Bean
    WebFilter legacyPaths() {
      return (exchange, chain) -> {
        String path = exchange.getRequest().getPath().pathWithinApplication().value();
        if (!path.startsWith("/legacy/")) {
          return chain.filter(exchange);
        }
        String current = "/probe/" + path.substring("/legacy/".length());
        return chain.filter(exchange.mutate().request(request -> request.path(current)).build());
      };
    }
  }

  static final class ShortCircuit implements WebFilter, Ordered {
    @Override
    public int getOrder() {
      return Ordered.LOWEST_PRECEDENCE;
    }

    @Override
    public Mono<Void> filter(
        org.springframework.web.server.ServerWebExchange exchange,
        org.springframework.web.server.WebFilterChain chain) {
      if (exchange.getRequest().getHeaders().getFirst("X-Short-Circuit") != null) {
        byte[] page = "{\"maintenance\":true}".getBytes(StandardCharsets.UTF_8);
        exchange.getResponse().setStatusCode(HttpStatus.OK);
        exchange.getResponse().getHeaders().setContentType(MediaType.APPLICATION_JSON);
        return exchange
            .getResponse()
            .writeWith(Mono.fromSupplier(() -> exchange.getResponse().bufferFactory().wrap(page)));
      }
      return chain.filter(exchange);
    }
  }

  @RestController
  public static class Plain {
    static final List<String> sent = new CopyOnWriteArrayList<>();

    /** A plain guarded handler, behind the short-circuiting filter when asked. */
    @PostMapping("/probe/plain")
    @IdempotentEndpoint
    public Mono<Map<String, Object>> plain(@RequestParam String to) {
      sent.add(to);
      return Mono.just(Map.of("sent", to));
    }
  }

  /** Validated through Spring AOP (class-level {@code @Validated}), refusals answered 400. */
  @RestController
  @Validated
  public static class Checked {
    static final Map<String, AtomicInteger> sent = new ConcurrentHashMap<>();

    @PostMapping("/probe/checked")
    @IdempotentEndpoint
    public Mono<Map<String, Object>> send(@RequestParam @Email String to) {
      sent.computeIfAbsent(to, ignored -> new AtomicInteger()).incrementAndGet();
      return Mono.just(Map.of("sent", to));
    }

    @ExceptionHandler(ConstraintViolationException.class)
    ResponseEntity<Map<String, Object>> invalid(ConstraintViolationException refused) {
      return ResponseEntity.badRequest()
          .body(Map.of("invalid", String.valueOf(refused.getMessage())));
    }
  }

  private static ConfigurableApplicationContext application;
  private static Plain plain;
  private static Checked checked;
  private static int port;

  @BeforeAll
  static void start() {
    start(Map.of("idempotency.store", "memory"));
  }

  /** Starts the application on a store; a subclass hides {@code start()} to pick another. */
  static void start(Map<String, Object> store, Class<?>... more) {
    List<Class<?>> sources =
        new java.util.ArrayList<>(List.of(RequestApplication.class, Plain.class, Checked.class));
    sources.addAll(List.of(more));
    SpringApplication builder = new SpringApplication(sources.toArray(Class<?>[]::new));
    builder.setWebApplicationType(WebApplicationType.REACTIVE);
    Map<String, Object> properties =
        new java.util.HashMap<>(
            Map.of(
                "server.port",
                "0",
                "server.address",
                "127.0.0.1",
                "idempotency.in-flight-wait",
                "100ms",
                "spring.main.banner-mode",
                "off",
                "spring.jmx.enabled",
                "false"));
    properties.putAll(store);
    builder.setDefaultProperties(properties);
    application = builder.run();
    plain = application.getBean(Plain.class);
    checked = application.getBean(Checked.class);
    port = application.getEnvironment().getRequiredProperty("local.server.port", Integer.class);
  }

  @AfterAll
  static void stop() {
    if (application != null) {
      application.close();
    }
  }

  private static HttpResponse<String> post(
      String pathAndQuery, String key, String contentType, String body, String... headers)
      throws Exception {
    HttpRequest.Builder request =
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + pathAndQuery))
            .timeout(Duration.ofSeconds(WAIT_SECONDS))
            .header("Idempotency-Key", key)
            .header("Content-Type", contentType)
            .POST(HttpRequest.BodyPublishers.ofString(body));
    for (int i = 0; i + 1 < headers.length; i += 2) {
      request.header(headers[i], headers[i + 1]);
    }
    // the first may still be being recorded
    return BoundedExchange.sendWhileInFlight(
        CLIENT, request.build(), Duration.ofSeconds(WAIT_SECONDS));
  }

  /**
   * SPEC 13: a request refused by validation before the handler ran is not stored. A controller
   * validated by Spring AOP (class-level {@code @Validated}) refuses in a proxy around the method;
   * the corrected retry under the same key must run.
   */
  @Test
  void aRefusalOfAValidatedControllerIsNotStored() throws Exception {
    String key = UUID.randomUUID().toString();
    String good = "good-" + key + "@example.com";

    HttpResponse<String> refused = post("/probe/checked?to=not-an-email", key, "text/plain", "");
    assertThat(refused.statusCode()).as(refused.body()).isEqualTo(400);

    HttpResponse<String> corrected = post("/probe/checked?to=" + good, key, "text/plain", "");

    assertThat(corrected.statusCode())
        .as("the corrected retry under the same key runs: %s", corrected.body())
        .isEqualTo(200);
    assertThat(Checked.sent.getOrDefault(good, new AtomicInteger()).get()).isEqualTo(1);
  }

  /**
   * A filter after the endpoint's that answers 200 without calling the handler: that answer is not
   * the handler's and is not stored; the next request under the key runs the handler.
   */
  @Test
  void anAnswerOfALaterFilterThatSkippedTheHandlerIsNotStored() throws Exception {
    String key = UUID.randomUUID().toString();
    String to = "plain-" + key + "@example.com";

    HttpResponse<String> shortCircuited =
        post("/probe/plain?to=" + to, key, "text/plain", "", "X-Short-Circuit", "on");
    assertThat(shortCircuited.statusCode()).isEqualTo(200);
    assertThat(shortCircuited.body()).contains("maintenance");

    HttpResponse<String> next = post("/probe/plain?to=" + to, key, "text/plain", "");

    assertThat(next.body()).as("the handler's own answer").contains("\"sent\"");
    assertThat(next.headers().firstValue(IdempotentEndpointWebFilter.REPLAYED_HEADER)).isEmpty();
    assertThat(Plain.sent).containsOnlyOnce(to);
  }

  /**
   * An application filter after the endpoint's that rewrites an old path to a guarded handler's:
   * the endpoint's filter looked the handler up before the rewrite and found none, so the handler
   * would run unguarded, every repeat sending again (before the fix: two sends under one key). The
   * dispatch refuses it instead (fail closed: 500, nothing sent); the handler at its own path is
   * guarded as always.
   */
  @Test
  void aGuardedHandlerReachedThroughALaterPathRewriteIsRefusedNotRunUnguarded() throws Exception {
    String key = UUID.randomUUID().toString();
    String to = "legacy-" + key + "@example.com";

    HttpResponse<String> first = post("/legacy/plain?to=" + to, key, "text/plain", "");
    HttpResponse<String> repeat = post("/legacy/plain?to=" + to, key, "text/plain", "");

    assertThat(Plain.sent)
        .as(
            "nothing sent unguarded (first %s %s, repeat %s, replayed: %s)",
            first.statusCode(),
            first.body(),
            repeat.statusCode(),
            repeat.headers().firstValue(IdempotentEndpointWebFilter.REPLAYED_HEADER))
        .doesNotContain(to);
    assertThat(first.statusCode()).isEqualTo(500);
    assertThat(repeat.statusCode()).isEqualTo(500);

    HttpResponse<String> guarded = post("/probe/plain?to=" + to, key, "text/plain", "");
    HttpResponse<String> replayed = post("/probe/plain?to=" + to, key, "text/plain", "");
    assertThat(guarded.statusCode()).as(guarded.body()).isEqualTo(200);
    assertThat(replayed.headers().firstValue(IdempotentEndpointWebFilter.REPLAYED_HEADER))
        .contains("true");
    assertThat(Plain.sent).containsOnlyOnce(to);
  }
}
