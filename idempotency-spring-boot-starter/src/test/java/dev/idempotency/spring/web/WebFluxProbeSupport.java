package dev.idempotency.spring.web;

import dev.idempotency.spring.autoconfigure.WebFluxAutoConfigurations;
import dev.idempotency.spring.reactive.NettyServer;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.WebApplicationType;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.http.MediaType;
import org.springframework.http.codec.ServerSentEvent;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * The WebFlux application of the issue 39 probes and what their cases share: a Netty server with
 * guarded handlers that a test holds ({@code /held/{id}}) or delays, and an HTTP client that
 * retries past 409 and 503. Each test class starts it once, on the store it names.
 */
abstract class WebFluxProbeSupport {

  static final HttpClient CLIENT =
      HttpClient.newBuilder()
          .version(HttpClient.Version.HTTP_1_1)
          .connectTimeout(Duration.ofSeconds(10))
          .build();
  static final long WAIT_SECONDS = 40;

  @Configuration(proxyBeanMethods = false)
  @Import({NettyServer.class, WebFluxAutoConfigurations.class})
  static class ProbeApplication {
    @Bean
    ClientGoneWatch clientGoneWatch() {
      return new ClientGoneWatch();
    }
  }

  @RestController
  public static class Probes {
    static final Map<String, Sinks.One<String>> answers = new ConcurrentHashMap<>();
    static final Map<String, AtomicInteger> runs = new ConcurrentHashMap<>();

    static Sinks.One<String> answer(String id) {
      return answers.computeIfAbsent(id, ignored -> Sinks.one());
    }

    static AtomicInteger runs(String id) {
      return runs.computeIfAbsent(id, ignored -> new AtomicInteger());
    }

    /** One send that the provider answers when the test says so. */
    @PostMapping(path = "/held/{id}", produces = MediaType.APPLICATION_JSON_VALUE)
    @IdempotentEndpoint
    public Mono<Map<String, Object>> held(@PathVariable String id) {
      return Mono.defer(
          () -> {
            // the answer is taken before the run is counted: a test that sees the run and then
            // replaces the answer (a retry's) must not have the first run read the new one
            Sinks.One<String> answer = answer(id);
            int run = runs(id).incrementAndGet();
            return answer.asMono().map(receipt -> Map.of("receipt", receipt, "run", run));
          });
    }

    /** One send that the provider answers after {@code ms} milliseconds. */
    @PostMapping(path = "/delayed/{id}/{ms}", produces = MediaType.APPLICATION_JSON_VALUE)
    @IdempotentEndpoint
    public Mono<Map<String, Object>> delayed(@PathVariable String id, @PathVariable long ms) {
      return Mono.defer(
          () -> {
            int run = runs(id).incrementAndGet();
            return Mono.delay(Duration.ofMillis(ms))
                .map(ignored -> Map.<String, Object>of("receipt", "r-" + id, "run", run));
          });
    }
  }

  @RestController
  public static class Streams {
    static final Map<String, AtomicInteger> sent = new ConcurrentHashMap<>();
    static final Map<String, String> ended = new ConcurrentHashMap<>();

    static AtomicInteger sent(String id) {
      return sent.computeIfAbsent(id, ignored -> new AtomicInteger());
    }

    private static Flux<Map<String, Object>> sends(String id, long ms) {
      return Flux.defer(
          () -> {
            Probes.runs(id).incrementAndGet();
            // each send waits for demand (a provider call per element, as concatMap makes it)
            return Flux.range(0, 3)
                .concatMap(
                    n ->
                        Mono.delay(Duration.ofMillis(ms))
                            .map(
                                ignored -> {
                                  sent(id).incrementAndGet(); // the provider accepted send n
                                  return Map.<String, Object>of("n", n, "receipt", "r-" + id);
                                }))
                .doOnCancel(() -> ended.putIfAbsent(id, "cancelled"))
                .doOnError(error -> ended.putIfAbsent(id, "failed: " + error))
                .doOnComplete(() -> ended.putIfAbsent(id, "completed"));
          });
    }

    /** Three sends, one server-sent event each. */
    @PostMapping(path = "/events/{id}/{ms}", produces = MediaType.TEXT_EVENT_STREAM_VALUE)
    @IdempotentEndpoint
    public Flux<ServerSentEvent<Map<String, Object>>> events(
        @PathVariable String id, @PathVariable long ms) {
      return sends(id, ms).map(receipt -> ServerSentEvent.builder(receipt).build());
    }

    /** Three sends, one NDJSON line each. */
    @PostMapping(path = "/lines/{id}/{ms}", produces = MediaType.APPLICATION_NDJSON_VALUE)
    @IdempotentEndpoint
    public Flux<Map<String, Object>> lines(@PathVariable String id, @PathVariable long ms) {
      return sends(id, ms);
    }

    /** Three sends, answered as one JSON array (held until it ends: within the bound). */
    @PostMapping(path = "/array/{id}/{ms}", produces = MediaType.APPLICATION_JSON_VALUE)
    @IdempotentEndpoint
    public Flux<Map<String, Object>> array(@PathVariable String id, @PathVariable long ms) {
      return sends(id, ms);
    }
  }

  static ConfigurableApplicationContext application;
  static ClientGoneWatch watch;
  static int port;

  static void start(Map<String, Object> store, Class<?>... more) {
    List<Class<?>> sources =
        new ArrayList<>(List.of(ProbeApplication.class, Probes.class, Streams.class));
    sources.addAll(List.of(more));
    SpringApplication builder = new SpringApplication(sources.toArray(Class<?>[]::new));
    builder.setWebApplicationType(WebApplicationType.REACTIVE);
    Map<String, Object> properties =
        new HashMap<>(
            Map.of(
                "server.port", "0",
                "server.address", "127.0.0.1",
                "idempotency.in-flight-wait", "100ms",
                "idempotency.lease", "3s",
                "spring.main.banner-mode", "off",
                "spring.jmx.enabled", "false"));
    properties.putAll(store);
    builder.setDefaultProperties(properties);
    application = builder.run();
    watch = application.getBean(ClientGoneWatch.class);
    port = application.getEnvironment().getRequiredProperty("local.server.port", Integer.class);
  }

  @AfterAll
  static void stop() {
    if (application != null) {
      application.close();
    }
  }

  static HttpRequest post(String path, String key) {
    return HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
        .timeout(Duration.ofSeconds(WAIT_SECONDS))
        .header("Idempotency-Key", key)
        .POST(HttpRequest.BodyPublishers.noBody())
        .build();
  }

  /** The retry under the same key, repeated (bounded) while the first is still in flight. */
  static HttpResponse<String> retry(String path, String key) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_SECONDS);
    HttpResponse<String> retry = CLIENT.send(post(path, key), HttpResponse.BodyHandlers.ofString());
    while ((retry.statusCode() == 409 || retry.statusCode() == 503)
        && System.nanoTime() < deadline) {
      Thread.sleep(20);
      retry = CLIENT.send(post(path, key), HttpResponse.BodyHandlers.ofString());
    }
    return retry;
  }

  static void await(AtomicInteger counter, int expected) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_SECONDS);
    while (counter.get() < expected && System.nanoTime() < deadline) {
      Thread.sleep(5);
    }
  }

  static void awaitEnded(String id) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_SECONDS);
    while (Streams.ended.get(id) == null && System.nanoTime() < deadline) {
      Thread.sleep(5);
    }
  }

  static boolean replayed(HttpResponse<String> response) {
    return response
        .headers()
        .firstValue(IdempotentEndpointWebFilter.REPLAYED_HEADER)
        .orElse("")
        .equals("true");
  }
}
