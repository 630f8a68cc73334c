package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.BoundedExchange;
import dev.idempotency.spring.autoconfigure.WebFluxAutoConfigurations;
import dev.idempotency.spring.reactive.NettyServer;
import java.io.BufferedReader;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
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
import org.springframework.http.codec.ServerSentEvent;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Sinks;

/**
 * A guarded WebFlux handler that streams its response ({@code Flux} body, server-sent events) in a
 * real application on Reactor Netty: the response is never held whole in memory. A stream written
 * element by element (server-sent events) reaches the client as it comes, its key claimed until it
 * ends, and is then stored and replayed; any other body is held up to {@code
 * idempotency.http.max-response-size}. Past that bound either goes on to the client as it comes and
 * is recorded as answered without its body, so a retry is told so (422) instead of sending again.
 * The handlers stream from sinks the test drives, so "before the stream ended" is a fact, not a
 * guess about speed.
 */
class WebFluxStreamingResponseTest {

  private static final HttpClient CLIENT =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();
  private static final long WAIT_SECONDS = 30;

  /**
   * The application: the starter's and WebFlux's auto-configuration, Reactor Netty, no component
   * scan.
   */
  @Configuration(proxyBeanMethods = false)
  @Import({NettyServer.class, WebFluxAutoConfigurations.class})
  static class StreamingApplication {}

  @RestController
  public static class Streams {
    final Map<String, Sinks.Many<String>> sinks = new ConcurrentHashMap<>();
    final Map<String, AtomicInteger> runs = new ConcurrentHashMap<>();

    Sinks.Many<String> sink(String id) {
      return sinks.computeIfAbsent(id, ignored -> Sinks.many().unicast().onBackpressureBuffer());
    }

    int runs(String id) {
      return runs.computeIfAbsent(id, ignored -> new AtomicInteger()).get();
    }

    @PostMapping(path = "/events/{id}", produces = MediaType.TEXT_EVENT_STREAM_VALUE)
    @IdempotentEndpoint
    public Flux<ServerSentEvent<String>> events(@PathVariable String id) {
      runs.computeIfAbsent(id, ignored -> new AtomicInteger()).incrementAndGet();
      return sink(id).asFlux().map(text -> ServerSentEvent.builder(text).build());
    }

    @PostMapping(path = "/report/{id}", produces = MediaType.TEXT_PLAIN_VALUE)
    @IdempotentEndpoint
    public Flux<String> report(@PathVariable String id) {
      runs.computeIfAbsent(id, ignored -> new AtomicInteger()).incrementAndGet();
      return sink(id).asFlux();
    }
  }

  private static ConfigurableApplicationContext application;
  private static Streams streams;
  private static int port;

  @BeforeAll
  static void start() {
    SpringApplication builder = new SpringApplication(StreamingApplication.class, Streams.class);
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
    streams = application.getBean(Streams.class);
    port = application.getEnvironment().getRequiredProperty("local.server.port", Integer.class);
  }

  @AfterAll
  static void stop() {
    if (application != null) {
      application.close();
    }
  }

  private static HttpRequest post(String path, String key) {
    return HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
        .timeout(Duration.ofSeconds(WAIT_SECONDS))
        .header("Idempotency-Key", key)
        .POST(HttpRequest.BodyPublishers.noBody())
        .build();
  }

  /** The response's head, which must come while the handler's stream is still open. */
  private static HttpResponse<InputStream> opened(String path, String key) throws Exception {
    return CLIENT
        .sendAsync(post(path, key), HttpResponse.BodyHandlers.ofInputStream())
        .get(WAIT_SECONDS, TimeUnit.SECONDS);
  }

  private static String within(java.util.concurrent.Callable<String> read) throws Exception {
    return CompletableFuture.supplyAsync(
            () -> {
              try {
                return read.call();
              } catch (Exception e) {
                throw new IllegalStateException(e);
              }
            })
        .get(WAIT_SECONDS, TimeUnit.SECONDS);
  }

  /**
   * A repeat once the first request's outcome is recorded: the first is recorded just after its
   * last bytes are written (a stream) or as it passes the bound, so a repeat in between is told it
   * is in flight (409); polled, bounded.
   */
  private static HttpResponse<String> settled(String path, String key) throws Exception {
    return BoundedExchange.sendWhileInFlight(
        CLIENT, post(path, key), Duration.ofSeconds(WAIT_SECONDS));
  }

  private static String id() {
    return UUID.randomUUID().toString();
  }

  @Test
  void serverSentEventsReachTheClientAsTheyComeAndOnceEndedAreReplayedByteForByte()
      throws Exception {
    String id = id();
    String key = id();
    streams.sink(id).tryEmitNext("first").orThrow();

    HttpResponse<InputStream> response = opened("/events/" + id, key);
    BufferedReader lines =
        new BufferedReader(new InputStreamReader(response.body(), StandardCharsets.UTF_8));

    assertThat(response.statusCode()).isEqualTo(200);
    assertThat(response.headers().firstValue("Content-Type"))
        .hasValueSatisfying(type -> assertThat(type).startsWith("text/event-stream"));
    assertThat(within(lines::readLine)).isEqualTo("data:first");
    assertThat(within(lines::readLine)).isEmpty();
    // while the stream is open the key stays claimed: a repeat is told so, nothing runs again
    HttpResponse<String> meanwhile =
        BoundedExchange.send(CLIENT, post("/events/" + id, key), stringBody());
    assertThat(meanwhile.statusCode()).isEqualTo(409);
    streams.sink(id).tryEmitNext("second").orThrow();
    assertThat(within(lines::readLine)).isEqualTo("data:second");
    streams.sink(id).tryEmitComplete().orThrow();
    assertThat(within(lines::readLine)).isEmpty();
    assertThat(within(() -> String.valueOf(lines.readLine()))).isEqualTo("null");

    HttpResponse<String> retry = settled("/events/" + id, key);
    assertThat(retry.statusCode()).isEqualTo(200);
    assertThat(retry.body()).isEqualTo("data:first\n\ndata:second\n\n");
    assertThat(retry.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(streams.runs(id)).isEqualTo(1);
  }

  @Test
  void serverSentEventsPastTheResponseLimitAreSentAndARetryIsToldTheyWereNotKept()
      throws Exception {
    String id = id();
    String key = id();
    String big = "x".repeat(2_000); // past the 1 KB limit
    streams.sink(id).tryEmitNext(big).orThrow();

    HttpResponse<InputStream> response = opened("/events/" + id, key);
    BufferedReader lines =
        new BufferedReader(new InputStreamReader(response.body(), StandardCharsets.UTF_8));

    assertThat(within(lines::readLine)).isEqualTo("data:" + big);
    HttpResponse<String> meanwhile = settled("/events/" + id, key);
    assertThat(meanwhile.statusCode()).isEqualTo(422);
    assertThat(meanwhile.body()).contains("response-not-stored");
    streams.sink(id).tryEmitNext("end").orThrow();
    assertThat(within(lines::readLine)).isEmpty();
    assertThat(within(lines::readLine)).isEqualTo("data:end");
    streams.sink(id).tryEmitComplete().orThrow();

    HttpResponse<String> retry = settled("/events/" + id, key);
    assertThat(retry.statusCode()).isEqualTo(422);
    assertThat(retry.body()).contains("response-not-stored", "200");
    assertThat(streams.runs(id)).isEqualTo(1);
  }

  @Test
  void aBodyPastTheResponseLimitIsSentOnBeforeItEndsAndARetryIsToldItWasNotKept() throws Exception {
    String id = id();
    String key = id();
    String big = "x".repeat(2_000); // past the 1 KB limit
    streams.sink(id).tryEmitNext(big).orThrow();

    HttpResponse<InputStream> response = opened("/report/" + id, key);

    assertThat(response.statusCode()).isEqualTo(200);
    byte[] first = within(() -> new String(response.body().readNBytes(big.length()))).getBytes();
    assertThat(new String(first, StandardCharsets.UTF_8)).isEqualTo(big);
    streams.sink(id).tryEmitNext("end").orThrow();
    streams.sink(id).tryEmitComplete().orThrow();
    assertThat(within(() -> new String(response.body().readAllBytes(), StandardCharsets.UTF_8)))
        .isEqualTo("end");

    HttpResponse<String> retry = settled("/report/" + id, key);
    assertThat(retry.statusCode()).isEqualTo(422);
    assertThat(retry.body()).contains("response-not-stored", "200");
    assertThat(streams.runs(id)).isEqualTo(1);
  }

  @Test
  void aStreamedBodyWithinTheLimitIsStoredAndReplayedByteForByte() throws Exception {
    String id = id();
    String key = id();
    streams.sink(id).tryEmitNext("a, ").orThrow();
    streams.sink(id).tryEmitNext("b").orThrow();
    streams.sink(id).tryEmitComplete().orThrow();

    HttpResponse<String> first =
        BoundedExchange.send(CLIENT, post("/report/" + id, key), stringBody());
    HttpResponse<String> retry =
        BoundedExchange.send(CLIENT, post("/report/" + id, key), stringBody());

    assertThat(first.statusCode()).isEqualTo(200);
    assertThat(first.body()).isEqualTo("a, b");
    assertThat(retry.statusCode()).isEqualTo(200);
    assertThat(retry.body()).isEqualTo("a, b");
    assertThat(retry.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(streams.runs(id)).isEqualTo(1);
  }

  private static HttpResponse.BodyHandler<String> stringBody() {
    return HttpResponse.BodyHandlers.ofString();
  }
}
