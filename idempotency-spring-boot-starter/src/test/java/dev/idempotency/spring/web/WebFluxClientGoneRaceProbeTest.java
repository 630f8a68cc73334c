package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.autoconfigure.WebFluxAutoConfigurations;
import dev.idempotency.spring.reactive.NettyServer;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
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
 * Adversarial probes of issue 39's WebFlux fixes (branch probe39d): SPEC 1 on a guarded WebFlux
 * handler whose client goes away at each stage, races its handler's completion, or comes sixteen
 * times at once. Each case asserts the promise: one run per key, the key never left in progress, a
 * retry replays the first answer.
 */
@Tag("open-finding")
class WebFluxClientGoneRaceProbeTest {

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
            int run = runs(id).incrementAndGet();
            return answer(id).asMono().map(receipt -> Map.of("receipt", receipt, "run", run));
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

  @BeforeAll
  static void start() {
    start(Map.of("idempotency.store", "memory"));
  }

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

  @Test
  void sixteenConcurrentRequestsWithOneKeyRunTheHandlerOnce() throws Exception {
    String id = UUID.randomUUID().toString();
    String key = UUID.randomUUID().toString();
    String path = "/held/" + id;
    List<CompletableFuture<HttpResponse<String>>> first = new ArrayList<>();
    for (int i = 0; i < 16; i++) {
      first.add(CLIENT.sendAsync(post(path, key), HttpResponse.BodyHandlers.ofString()));
    }
    await(Probes.runs(id), 1);
    // the other fifteen have their answer (409 after the in-flight wait) before the send answers
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_SECONDS);
    while (first.stream().filter(CompletableFuture::isDone).count() < 15
        && System.nanoTime() < deadline) {
      Thread.sleep(5);
    }
    Probes.answer(id).tryEmitValue("accepted").orThrow();
    List<HttpResponse<String>> answered = new ArrayList<>();
    for (CompletableFuture<HttpResponse<String>> response : first) {
      answered.add(response.get(WAIT_SECONDS, TimeUnit.SECONDS));
    }
    List<CompletableFuture<HttpResponse<String>>> second = new ArrayList<>();
    for (int i = 0; i < 16; i++) {
      second.add(CLIENT.sendAsync(post(path, key), HttpResponse.BodyHandlers.ofString()));
    }
    List<HttpResponse<String>> repeats = new ArrayList<>();
    for (CompletableFuture<HttpResponse<String>> response : second) {
      repeats.add(response.get(WAIT_SECONDS, TimeUnit.SECONDS));
    }

    assertThat(Probes.runs(id).get()).as("sixteen requests, one key: one run").isEqualTo(1);
    List<HttpResponse<String>> sent =
        answered.stream().filter(r -> r.statusCode() == 200 && !replayed(r)).toList();
    assertThat(sent).as("one request answered by the run").hasSize(1);
    assertThat(answered)
        .allSatisfy(
            r ->
                assertThat(r.statusCode() == 409 || r.statusCode() == 200)
                    .as("%s %s", r.statusCode(), r.body())
                    .isTrue());
    assertThat(repeats)
        .allSatisfy(
            r -> {
              assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
              assertThat(replayed(r)).isTrue();
              assertThat(r.body()).isEqualTo(sent.get(0).body());
            });
  }

  /**
   * The client goes away at a different moment in each round (before the claim answers, while the
   * handler runs, as it completes, while its answer is written), against a handler that answers
   * after a different delay: each key runs once, is never left in progress, and its retry replays.
   */
  @Test
  void aClientGoneAtAnyMomentOfItsRequestLeavesOneRunAndAReplay() throws Exception {
    List<String> problems = new ArrayList<>();
    int[] closeAfter = {0, 1, 2, 3, 5, 8, 12, 20, 30, 50};
    int[] answerAfter = {0, 2, 5, 10, 25};
    for (int handlerMs : answerAfter) {
      for (int clientMs : closeAfter) {
        String id = UUID.randomUUID().toString();
        String key = UUID.randomUUID().toString();
        String path = "/delayed/" + id + "/" + handlerMs;
        try (Socket client = ClientGoneWatch.post(port, path, key)) {
          if (clientMs > 0) {
            Thread.sleep(clientMs); // a moment to vary the race, not a wait for the server
          }
        }
        HttpResponse<String> retry = retry(path, key);
        await(Probes.runs(id), 1);
        int runs = Probes.runs(id).get();
        if (runs != 1 || retry.statusCode() != 200 || !retry.body().contains("\"run\":1")) {
          problems.add(
              "handler "
                  + handlerMs
                  + " ms, client gone after "
                  + clientMs
                  + " ms: "
                  + runs
                  + " runs, retry "
                  + retry.statusCode()
                  + " replayed="
                  + replayed(retry)
                  + " "
                  + retry.body());
        }
      }
    }
    assertThat(problems).isEmpty();
  }

  /**
   * The handler's provider call fails after its client went away: the key is released (the
   * handler's own error), never left in progress, and the retry runs again and is answered.
   */
  @Test
  void aHandlerThatFailsAfterItsClientWentAwayReleasesTheKey() throws Exception {
    String id = UUID.randomUUID().toString();
    String key = UUID.randomUUID().toString();
    String path = "/held/" + id;
    try (Socket client = ClientGoneWatch.post(port, path, key)) {
      await(Probes.runs(id), 1);
      assertThat(Probes.runs(id).get()).isEqualTo(1);
    }
    Probes.answer(id).tryEmitError(new IllegalStateException("provider refused")).orThrow();
    Probes.answers.put(id, Sinks.one());
    Probes.answer(id).tryEmitValue("accepted-on-retry").orThrow();

    HttpResponse<String> retry = retry(path, key);

    assertThat(retry.statusCode()).as(retry.body()).isEqualTo(200);
    assertThat(replayed(retry)).isFalse();
    assertThat(retry.body()).contains("accepted-on-retry");
    assertThat(Probes.runs(id).get()).isEqualTo(2);
  }

  /**
   * A stream of three sends (server-sent events, NDJSON, a JSON array held until its end) whose
   * client goes away at a different moment in each round: the stream runs to its end (three sends),
   * the handler runs once, the key is not left in progress, and a retry is answered from the store
   * (a replay, or 422 when an event the client never got kept the body from being stored).
   */
  @Test
  void aStreamWhoseClientGoesAwayAtAnyMomentSendsEachNotificationOnce() throws Exception {
    List<String> problems = new ArrayList<>();
    int[] closeAfter = {0, 2, 5, 10, 15, 25, 40};
    for (String kind : List.of("events", "lines", "array", "events", "lines", "array")) {
      for (int clientMs : closeAfter) {
        String id = UUID.randomUUID().toString();
        String key = UUID.randomUUID().toString();
        String path = "/" + kind + "/" + id + "/5";
        Streams.ended.remove(id);
        try (Socket client = ClientGoneWatch.post(port, path, key)) {
          if (clientMs > 0) {
            Thread.sleep(clientMs); // a moment to vary the race, not a wait for the server
          }
        }
        awaitEnded(id);
        HttpResponse<String> retry = retry(path, key);
        int runs = Probes.runs(id).get();
        int sent = Streams.sent(id).get();
        boolean answered =
            (retry.statusCode() == 200 && replayed(retry)) || retry.statusCode() == 422;
        if (runs != 1 || sent != 3 || !answered) {
          problems.add(
              kind
                  + ", client gone after "
                  + clientMs
                  + " ms: "
                  + runs
                  + " runs, "
                  + sent
                  + " sends, first run "
                  + Streams.ended.get(id)
                  + ", retry "
                  + retry.statusCode()
                  + " replayed="
                  + replayed(retry)
                  + " "
                  + retry.body());
        }
      }
    }
    assertThat(problems).isEmpty();
  }
}
