package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;
import static reactor.core.publisher.Sinks.EmitResult.OK;

import dev.idempotency.spring.BoundedExchange;
import dev.idempotency.spring.autoconfigure.WebFluxAutoConfigurations;
import dev.idempotency.spring.reactive.NettyServer;
import java.io.BufferedReader;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
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
import org.springframework.http.MediaType;
import org.springframework.http.codec.ServerSentEvent;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Sinks;

/**
 * A guarded server-sent event stream whose client goes away after events went out (issue 39, SPEC 1
 * and 13; found by adversarial probes). Before issue 39's client-gone fix, WebFlux cancelled the
 * handler's stream when the client went away, so the copy was not the whole answer: it was recorded
 * without its body (and before that, stored and replayed as complete). A client that goes away now
 * ends the request, not the send: the handler's stream is not cancelled, runs on to its own end,
 * and, copied whole within the bound, is stored and replayed whole. So the case asserts that the
 * stream goes on after the disconnect (its next element is taken), that the handler runs once, and
 * that the retry replays the whole stream: never one the disconnect cut short, never a second run.
 */
class WebFluxStreamInterruptedTest {

  private static final HttpClient CLIENT =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();
  private static final long WAIT_SECONDS = 30;

  @Configuration(proxyBeanMethods = false)
  @Import({NettyServer.class, WebFluxAutoConfigurations.class})
  static class ProbeApplication {
    @Bean
    ClientGoneWatch clientGoneWatch() {
      return new ClientGoneWatch();
    }
  }

  @RestController
  public static class Streams {
    final Map<String, Sinks.Many<String>> sinks = new ConcurrentHashMap<>();
    final Map<String, AtomicInteger> runs = new ConcurrentHashMap<>();

    Sinks.Many<String> sink(String id) {
      return sinks.computeIfAbsent(id, ignored -> Sinks.many().unicast().onBackpressureBuffer());
    }

    /** Forgets the stream of {@code id}, so that the handler's next run gets a new one. */
    void renew(String id) {
      sinks.remove(id);
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
  }

  private static ConfigurableApplicationContext application;
  private static Streams streams;
  private static ClientGoneWatch watch;
  private static int port;

  @BeforeAll
  static void start() {
    SpringApplication builder = new SpringApplication(ProbeApplication.class, Streams.class);
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
    watch = application.getBean(ClientGoneWatch.class);
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

  @Test
  void aClientGoneMidStreamGoesOnAndIsReplayedWhole() throws Exception {
    String id = UUID.randomUUID().toString();
    String key = UUID.randomUUID().toString();
    String path = "/events/" + id;
    Sinks.Many<String> sink = streams.sink(id);
    sink.tryEmitNext("first").orThrow();

    try (Socket client = ClientGoneWatch.post(port, path, key)) {
      InputStream in = client.getInputStream();
      StringBuilder seen = new StringBuilder();
      while (!seen.toString().contains("data:first")) {
        int next = in.read();
        assertThat(next).as("the first event arrives: %s", seen).isNotNegative();
        seen.append((char) next);
      }
    } // the client goes away mid-stream
    assertThat(watch.gone(path).await(WAIT_SECONDS, TimeUnit.SECONDS))
        .as("the server saw the client go away")
        .isTrue();

    Sinks.EmitResult more = sink.tryEmitNext("second");
    sink.tryEmitComplete();

    HttpResponse<String> retry =
        BoundedExchange.sendWhileInFlight(
            CLIENT, post(path, key), Duration.ofSeconds(WAIT_SECONDS));

    assertThat(more).as("the handler's stream goes on after the disconnect").isEqualTo(OK);
    assertThat(streams.runs(id))
        .as("retry %s %s %s", retry.statusCode(), retry.headers().map(), retry.body())
        .isEqualTo(1);
    assertThat(retry.statusCode()).isEqualTo(200);
    assertThat(retry.headers().firstValue(IdempotentEndpointWebFilter.REPLAYED_HEADER))
        .contains("true");
    assertThat(retry.body()).isEqualTo("data:first\n\ndata:second\n\n");
  }

  /**
   * A handler's stream that fails after events went out releases its key (SPEC 6: the sender
   * failed; docs/spring-boot.md, "Streaming responses"): the retry is not a replay of the broken
   * stream nor a {@code 409} for the window; it runs the handler again and gets the whole new
   * stream. A stream whose events stand for sends guards each send ({@code @Idempotent} on a method
   * returning {@code Mono}); the endpoint cannot tell which of the events were sent.
   */
  @Test
  void aStreamThatFailsAfterEventsWentOutIsReleasedAndTheRetryRunsTheHandlerAgain()
      throws Exception {
    String id = UUID.randomUUID().toString();
    String key = UUID.randomUUID().toString();
    Sinks.Many<String> sink = streams.sink(id);
    sink.tryEmitNext("first").orThrow();

    HttpResponse<InputStream> response =
        CLIENT
            .sendAsync(post("/events/" + id, key), HttpResponse.BodyHandlers.ofInputStream())
            .get(WAIT_SECONDS, TimeUnit.SECONDS);
    BufferedReader lines =
        new BufferedReader(new InputStreamReader(response.body(), StandardCharsets.UTF_8));
    assertThat(response.statusCode()).isEqualTo(200);
    assertThat(lines.readLine()).isEqualTo("data:first");
    sink.tryEmitError(new IllegalStateException("the provider failed mid-stream")).orThrow();
    try {
      while (lines.readLine() != null) {
        // drain what the server still sends until the stream ends or breaks
      }
    } catch (java.io.IOException broken) {
      // the server aborts the response: expected
    }
    streams.renew(id);
    Sinks.Many<String> again = streams.sink(id);
    again.tryEmitNext("again").orThrow();
    again.tryEmitComplete().orThrow();

    HttpResponse<String> retry =
        BoundedExchange.sendWhileInFlight(
            CLIENT, post("/events/" + id, key), Duration.ofSeconds(WAIT_SECONDS));

    assertThat(retry.statusCode())
        .as("retry %s %s %s", retry.statusCode(), retry.headers().map(), retry.body())
        .isEqualTo(200);
    assertThat(retry.headers().firstValue("Idempotent-Replayed")).isEmpty();
    assertThat(retry.body()).isEqualTo("data:again\n\n");
    assertThat(streams.runs(id)).isEqualTo(2);
  }
}
