package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.BoundedExchange;
import dev.idempotency.spring.autoconfigure.WebFluxAutoConfigurations;
import dev.idempotency.spring.reactive.NettyServer;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
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
 * A client that goes away from a guarded WebFlux stream ends the request, not the send (issue 39,
 * SPEC 1 and 13; found by the adversarial probe of branch probe39c): a handler that sends one
 * notification per element of the {@code Flux} it returns (a batch answering one receipt per send,
 * or a server-sent event stream). Before the fix the client's disconnect cancelled the handler's
 * {@code Flux}: the sends after it never happened and a retry got 422 (a lost send), or, before the
 * first event, the key was released and the retry ran the handler again (a second send). Now the
 * handler's stream runs to its end and its outcome is recorded from its own terminal signal.
 */
class WebFluxClientGoneStreamTest {

  private static final HttpClient CLIENT =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();
  private static final long WAIT_SECONDS = 30;

  @Configuration(proxyBeanMethods = false)
  @Import({NettyServer.class, WebFluxAutoConfigurations.class})
  static class StreamApplication {
    @Bean
    ClientGoneWatch clientGoneWatch() {
      return new ClientGoneWatch();
    }
  }

  @RestController
  public static class Sends {
    static final Map<String, Sinks.Many<Integer>> sinks = new ConcurrentHashMap<>();
    static final Map<String, AtomicInteger> sent = new ConcurrentHashMap<>();
    static final Map<String, AtomicInteger> runs = new ConcurrentHashMap<>();
    static final Map<String, CountDownLatch> cancelled = new ConcurrentHashMap<>();

    Sinks.Many<Integer> sink(String id) {
      return sinks.computeIfAbsent(id, ignored -> Sinks.many().unicast().onBackpressureBuffer());
    }

    AtomicInteger counter(Map<String, AtomicInteger> counters, String id) {
      return counters.computeIfAbsent(id, ignored -> new AtomicInteger());
    }

    CountDownLatch cancelled(String id) {
      return cancelled.computeIfAbsent(id, ignored -> new CountDownLatch(1));
    }

    /** One send per element; the answer is a JSON array of receipts, about 300 bytes each. */
    private Flux<Map<String, Object>> receipts(String id) {
      counter(runs, id).incrementAndGet();
      return sink(id)
          .asFlux()
          .map(
              n -> {
                counter(sent, id).incrementAndGet(); // the provider accepted notification n
                return Map.<String, Object>of("n", n, "receipt", "r".repeat(300));
              })
          .doOnCancel(() -> cancelled(id).countDown());
    }

    @PostMapping(path = "/batch/{id}", produces = MediaType.APPLICATION_JSON_VALUE)
    @IdempotentEndpoint
    public Flux<Map<String, Object>> batch(@PathVariable String id) {
      return receipts(id);
    }

    @PostMapping(path = "/events/{id}", produces = MediaType.TEXT_EVENT_STREAM_VALUE)
    @IdempotentEndpoint
    public Flux<ServerSentEvent<Map<String, Object>>> events(@PathVariable String id) {
      return receipts(id).map(receipt -> ServerSentEvent.builder(receipt).build());
    }
  }

  private static ConfigurableApplicationContext application;
  private static Sends sends;
  private static ClientGoneWatch watch;
  private static int port;

  @BeforeAll
  static void start() {
    start(Map.of("idempotency.store", "memory"));
  }

  /** Starts the application on a store; a subclass hides {@code start()} to pick another. */
  static void start(Map<String, Object> store, Class<?>... more) {
    List<Class<?>> sources = new ArrayList<>(List.of(StreamApplication.class, Sends.class));
    sources.addAll(List.of(more));
    SpringApplication builder = new SpringApplication(sources.toArray(Class<?>[]::new));
    builder.setWebApplicationType(WebApplicationType.REACTIVE);
    Map<String, Object> properties =
        new HashMap<>(
            Map.of(
                "server.port", "0",
                "server.address", "127.0.0.1",
                "idempotency.http.max-response-size", "1KB",
                "idempotency.in-flight-wait", "100ms",
                "spring.main.banner-mode", "off",
                "spring.jmx.enabled", "false"));
    properties.putAll(store);
    builder.setDefaultProperties(properties);
    application = builder.run();
    sends = application.getBean(Sends.class);
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

  /** The retry under the same key, once the first call is no longer in flight. */
  private static HttpResponse<String> retry(String path, String key) throws Exception {
    return BoundedExchange.sendWhileInFlight(
        CLIENT, post(path, key), Duration.ofSeconds(WAIT_SECONDS));
  }

  private static void await(AtomicInteger counter, int expected) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_SECONDS);
    while (counter.get() < expected && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
  }

  private static Socket request(String path, String key) throws Exception {
    return ClientGoneWatch.post(port, path, key);
  }

  @Test
  void aClientGoneAfterABatchPassedTheResponseBoundDoesNotStopTheBatchsLaterSends()
      throws Exception {
    String id = UUID.randomUUID().toString();
    String key = UUID.randomUUID().toString();
    String path = "/batch/" + id;
    Sinks.Many<Integer> sink = sends.sink(id);
    for (int n = 1; n <= 5; n++) { // about 1.6 KB of receipts: past the 1 KB bound
      sink.tryEmitNext(n).orThrow();
    }

    try (Socket client = request(path, key)) {
      String head = new String(client.getInputStream().readNBytes(300), StandardCharsets.US_ASCII);
      assertThat(head).startsWith("HTTP/1.1 200").contains("[{");
    } // the client goes away while the batch still sends
    assertThat(watch.goneOrClosed(path, WAIT_SECONDS))
        .as("the server saw the client go away")
        .isTrue();

    List<Sinks.EmitResult> more = new ArrayList<>();
    for (int n = 6; n <= 8; n++) { // the batch goes on: the handler must still send each
      more.add(sink.tryEmitNext(n));
    }
    sink.tryEmitComplete();
    await(sends.counter(Sends.sent, id), 8);

    HttpResponse<String> retry = retry(path, key);
    assertThat(more)
        .as("the handler's stream goes on after the client went away")
        .containsOnly(Sinks.EmitResult.OK);
    assertThat(sends.cancelled(id).getCount()).as("the handler's stream is not cancelled").isOne();
    assertThat(sends.counter(Sends.sent, id).get()).isEqualTo(8);
    assertThat(sends.counter(Sends.runs, id).get()).as("the handler ran once").isEqualTo(1);
    assertThat(retry.statusCode())
        .as("past the bound: recorded without its body, never run again: %s", retry.body())
        .isEqualTo(422);
  }

  /**
   * The client goes away before the first event: neither a second run (a second send of each event)
   * nor a stop of the first run's sends. The sink replays its events to every subscriber, as a
   * handler run again would send them again. The copy of the stream, whole and within the bound, is
   * stored and replayed.
   */
  @Test
  void aClientGoneBeforeTheFirstEventDoesNotStopTheStreamsSends() throws Exception {
    String id = UUID.randomUUID().toString();
    String key = UUID.randomUUID().toString();
    String path = "/events/" + id;
    Sinks.Many<Integer> sink = Sinks.many().replay().all();
    Sends.sinks.put(id, sink);

    try (Socket client = request(path, key)) {
      await(sends.counter(Sends.runs, id), 1);
      assertThat(sends.counter(Sends.runs, id).get()).as("the handler ran").isEqualTo(1);
    } // the client goes away before the first event

    sink.tryEmitNext(1).orThrow(); // the first send: its event meets the closed connection
    assertThat(watch.goneOrClosed(path, WAIT_SECONDS))
        .as("the server saw the client go away")
        .isTrue();
    sink.tryEmitNext(2).orThrow(); // the second send
    sink.tryEmitComplete();
    await(sends.counter(Sends.sent, id), 2);

    HttpResponse<String> retry = retry(path, key);
    assertThat(
            sends.counter(Sends.runs, id).get()
                + " runs, "
                + sends.counter(Sends.sent, id).get()
                + " sends")
        .as(
            "the handler runs once and sends both notifications although the client went away"
                + " (first run's stream cancelled: %s; retry %s %s %s)",
            sends.cancelled(id).getCount() == 0,
            retry.statusCode(),
            retry.headers().map(),
            retry.body())
        .isEqualTo("1 runs, 2 sends");
    assertThat(retry.statusCode()).as(retry.body()).isEqualTo(200);
    assertThat(retry.headers().firstValue(IdempotentEndpointWebFilter.REPLAYED_HEADER))
        .contains("true");
    assertThat(retry.body()).contains("\"n\":1").contains("\"n\":2");
  }
}
