package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.EmbeddedServers;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import java.net.Socket;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.http.MediaType;
import org.springframework.http.codec.ServerSentEvent;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Probe (probeK) of the suspicion left by {@link WebFluxClientGoneRaceRedisProbeTest}'s stream case
 * (a key once kept in progress about 40 s under load): a guarded WebFlux stream of three sends
 * whose every step the test gates (each element, then the stream's end), and a raw client that goes
 * away (a reset) at each step in turn: after the handler ran and before any element, after each
 * element, and after the last element but before the stream's end. On Redis, for server-sent
 * events, NDJSON and a JSON array held until its end. Each key must send three times, run once, and
 * be answered from the store (a replay or 422) within 10 s of the stream's end: never left in
 * progress.
 */
class WebFluxStreamClientGoneStepsRedisProbeTest extends WebFluxProbeSupport {

  /** Whether the last row's first request was refused at its claim, before its handler ran. */
  private boolean refusedAtTheClaim;

  @BeforeAll
  static void start() {
    Map<String, Object> properties = new HashMap<>(WebFluxTestStores.REDIS);
    properties.put("idempotency.http.record-wait", "2s");
    start(properties, WebFluxTestStores.OnRedis.class, GatedStreams.class);
  }

  /** Passes on Boot 3.5 and 4.0, under 1 s per line (plus the application's start). */
  @Test
  void aStreamWhoseClientGoesAwayAtEachStepIsAnsweredFromTheStore() throws Exception {
    List<String> problems = new ArrayList<>();
    for (boolean reset : new boolean[] {true, false}) {
      for (String kind : List.of("events", "lines", "array")) {
        for (int goneAfter = 0; goneAfter <= 3; goneAfter++) {
          String problem = clientGoneAfter(kind, goneAfter, reset);
          if (problem != null) {
            problems.add(problem);
          }
        }
      }
    }
    assertThat(problems).isEmpty();
  }

  /**
   * Redis stalls past the store's operation timeout (2 s) at the claim: the request is refused
   * (503) before its handler ran, nothing was sent, and the retry after its client went away runs
   * the stream once. What the case above meets when a loaded machine stalls Redis at a claim (its
   * row once read "client gone after 0 steps: 1 runs, 3 sends, stream completed, retry 10 s after
   * its end 200 replayed=false": the retry's run was the only one). About 5 s per line.
   */
  @Test
  void aStreamRefusedAtItsClaimIsRunOnceByTheRetry() throws Exception {
    // 6 s: the request must reach its claim while Redis is still paused for longer than the 2 s
    // operation timeout; with 3 s, a loaded clean-clone run (both Boot lines at once) reached it
    // more than a second late, the claim waited less than 2 s and succeeded, and the row's premise
    // ("refused at its claim") failed. The retries below go past 503 for up to 10 s.
    pauseRedis(6_000);
    String problem = clientGoneAfter("events", 0, true);
    assertThat(problem).isNull();
    assertThat(refusedAtTheClaim).as("the first request was refused at its claim").isTrue();
  }

  /**
   * The client goes away while Redis is paused (every client, 1.5 s): while the claim waits for it
   * (before the handler ran), or after the stream's last step, while its outcome's record (and, for
   * the array held until its end, the client's answer) waits for it. Passes on Boot 3.5 and 4.0,
   * about 10 s per line: extended (the case above runs by default).
   */
  @Tag("extended")
  @Test
  void aStreamWhoseClientGoesAwayWhileTheStoreStallsIsAnsweredFromTheStore() throws Exception {
    List<String> problems = new ArrayList<>();
    for (String kind : List.of("events", "lines", "array")) {
      for (boolean atTheClaim : new boolean[] {true, false}) {
        String id = UUID.randomUUID().toString();
        String key = UUID.randomUUID().toString();
        String path = "/gated/" + kind + "/" + id;
        if (atTheClaim) {
          pauseRedis(1_500);
          try (Socket client = ClientGoneWatch.post(port, path, key)) {
            Thread.sleep(200); // a moment for the server to read the request; not a wait
            client.setSoLinger(true, 0);
          }
          for (int step = 0; step <= 3; step++) {
            GatedStreams.open(id, step);
          }
        } else {
          try (Socket client = ClientGoneWatch.post(port, path, key)) {
            await(Probes.runs(id), 1);
            for (int step = 0; step < 3; step++) {
              GatedStreams.open(id, step);
              await(Streams.sent(id), step + 1);
            }
            pauseRedis(1_500);
            GatedStreams.open(id, 3);
            awaitEnded(id);
            client.setSoLinger(true, 0);
          }
        }
        String problem =
            answeredFromTheStore(
                kind,
                atTheClaim ? "at the claim" : "at the record",
                id,
                key,
                path,
                !atTheClaim || Probes.runs(id).get() > 0);
        if (problem != null) {
          problems.add(problem);
        }
      }
    }
    assertThat(problems).isEmpty();
  }

  private static void pauseRedis(long millis) {
    RedisClient pauser =
        RedisClient.create(RedisURI.create("127.0.0.1", EmbeddedServers.redisPort()));
    try (StatefulRedisConnection<String, String> connection = pauser.connect()) {
      connection.sync().clientPause(millis);
    } finally {
      pauser.shutdown();
    }
  }

  /**
   * Null if the key ran once, sent three times and is answered from the store (a replay or 422)
   * within 10 s of the stream's end; if {@code ran} is false (the server never saw the request),
   * the retry runs it instead.
   */
  private static String answeredFromTheStore(
      String kind, String when, String id, String key, String path, boolean ran) throws Exception {
    if (ran) {
      awaitEnded(id);
    }
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    HttpResponse<String> retry = CLIENT.send(post(path, key), HttpResponse.BodyHandlers.ofString());
    while (retry.statusCode() == 409 && System.nanoTime() < deadline) {
      Thread.sleep(20);
      retry = CLIENT.send(post(path, key), HttpResponse.BodyHandlers.ofString());
    }
    int runs = Probes.runs(id).get();
    int sent = Streams.sent(id).get();
    boolean answered =
        (retry.statusCode() == 200 && (replayed(retry) || !ran)) || retry.statusCode() == 422;
    if (runs == 1 && sent == 3 && answered) {
      return null;
    }
    return kind
        + ", client gone "
        + when
        + ": "
        + runs
        + " runs, "
        + sent
        + " sends, stream "
        + Streams.ended.get(id)
        + ", retry 10 s after its end "
        + retry.statusCode()
        + " replayed="
        + replayed(retry)
        + " "
        + retry.body();
  }

  /**
   * The client goes away once {@code steps} steps were let through (and, for a flushed stream, once
   * it read the element of each), with a reset or a plain close; null if all held. A request the
   * store refused at its claim (503: Redis stalled past the store's operation timeout, as a loaded
   * machine can make it) never ran its handler: nothing was sent, so its retry must run the stream
   * once (SPEC 1: a refusal sends nothing, the retry's send is the one send), as in the store-stall
   * case below.
   */
  private String clientGoneAfter(String kind, int steps, boolean reset) throws Exception {
    String id = UUID.randomUUID().toString();
    String key = UUID.randomUUID().toString();
    String path = "/gated/" + kind + "/" + id;
    StringBuilder read = new StringBuilder();
    boolean ran;
    try (Socket client = ClientGoneWatch.post(port, path, key)) {
      ran = awaitRunOrAnswer(client, id, read);
      for (int step = 0; ran && step < steps; step++) {
        GatedStreams.open(id, step);
        await(Streams.sent(id), step + 1);
        if (!kind.equals("array")) {
          readUntil(client, read, "\"n\":" + step);
        }
      }
      if (reset) {
        client.setSoLinger(true, 0); // a reset, whatever was read
      } else {
        client.shutdownOutput(); // a plain close
      }
    }
    refusedAtTheClaim = !ran && read.toString().startsWith("HTTP/1.1 503");
    for (int step = ran ? steps : 0; step <= 3; step++) {
      GatedStreams.open(id, step);
      if (ran && step < 3) {
        await(Streams.sent(id), step + 1);
      }
    }
    if (ran) {
      awaitEnded(id);
    }
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    HttpResponse<String> retry = CLIENT.send(post(path, key), HttpResponse.BodyHandlers.ofString());
    // past 409 (the outcome's write still landing) and 503 (the store still stalled: nothing done)
    while ((retry.statusCode() == 409 || retry.statusCode() == 503)
        && System.nanoTime() < deadline) {
      Thread.sleep(20);
      retry = CLIENT.send(post(path, key), HttpResponse.BodyHandlers.ofString());
    }
    int runs = Probes.runs(id).get();
    int sent = Streams.sent(id).get();
    boolean answered =
        ran
            ? (retry.statusCode() == 200 && replayed(retry)) || retry.statusCode() == 422
            : refusedAtTheClaim && retry.statusCode() == 200 && !replayed(retry);
    if (runs == 1 && sent == 3 && answered) {
      return null;
    }
    return kind
        + (reset ? ", reset" : ", closed")
        + ", client gone after "
        + steps
        + " steps"
        + (ran ? "" : " (its request not run, answered: " + firstLine(read) + ")")
        + ": "
        + runs
        + " runs, "
        + sent
        + " sends, stream "
        + Streams.ended.get(id)
        + ", retry 10 s after its end "
        + retry.statusCode()
        + " replayed="
        + replayed(retry)
        + " "
        + retry.body();
  }

  /**
   * True once the request's handler ran; false if the server answered it first (a refusal at the
   * claim, read into {@code read}) or neither happened within the bound.
   */
  private static boolean awaitRunOrAnswer(Socket client, String id, StringBuilder read)
      throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_SECONDS);
    while (Probes.runs(id).get() < 1 && System.nanoTime() < deadline) {
      if (client.getInputStream().available() > 0) {
        byte[] buffer = new byte[4096];
        int n = client.getInputStream().read(buffer);
        if (n > 0) {
          read.append(new String(buffer, 0, n, StandardCharsets.UTF_8));
        }
        return Probes.runs(id).get() >= 1;
      }
      Thread.sleep(5);
    }
    return Probes.runs(id).get() >= 1;
  }

  private static String firstLine(CharSequence read) {
    String text = read.toString();
    int end = text.indexOf('\r');
    return end < 0 ? "nothing" : text.substring(0, end);
  }

  /** Reads the response (at most 20 s) until {@code expected} has come. */
  private static void readUntil(Socket client, StringBuilder read, String expected)
      throws Exception {
    byte[] buffer = new byte[4096];
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (read.indexOf(expected) < 0 && System.nanoTime() < deadline) {
      int n = client.getInputStream().read(buffer);
      if (n < 0) {
        return;
      }
      read.append(new String(buffer, 0, n, StandardCharsets.UTF_8));
    }
  }

  /**
   * Streams of three sends, each let through by the test ({@link #open}), then ended once it opens
   * a fourth step; counted in {@link Streams}' maps.
   */
  @RestController
  public static class GatedStreams {
    static final Map<String, CompletableFuture<Void>> steps = new ConcurrentHashMap<>();

    static CompletableFuture<Void> step(String id, int n) {
      return steps.computeIfAbsent(id + "/" + n, ignored -> new CompletableFuture<>());
    }

    static void open(String id, int n) {
      step(id, n).complete(null);
    }

    private static Mono<Void> gate(String id, int n) {
      return Mono.fromFuture(step(id, n), true).timeout(Duration.ofSeconds(30));
    }

    private static Flux<Map<String, Object>> sends(String id) {
      return Flux.defer(
          () -> {
            Probes.runs(id).incrementAndGet();
            return Flux.range(0, 3)
                .concatMap(
                    n ->
                        gate(id, n)
                            .then(
                                Mono.fromSupplier(
                                    () -> {
                                      Streams.sent(id).incrementAndGet();
                                      return Map.<String, Object>of("n", n, "receipt", "r-" + id);
                                    })))
                .concatWith(gate(id, 3).thenMany(Flux.<Map<String, Object>>empty()))
                .doOnCancel(() -> Streams.ended.putIfAbsent(id, "cancelled"))
                .doOnError(error -> Streams.ended.putIfAbsent(id, "failed: " + error))
                .doOnComplete(() -> Streams.ended.putIfAbsent(id, "completed"));
          });
    }

    @PostMapping(path = "/gated/events/{id}", produces = MediaType.TEXT_EVENT_STREAM_VALUE)
    @IdempotentEndpoint
    public Flux<ServerSentEvent<Map<String, Object>>> events(@PathVariable String id) {
      return sends(id).map(receipt -> ServerSentEvent.builder(receipt).build());
    }

    @PostMapping(path = "/gated/lines/{id}", produces = MediaType.APPLICATION_NDJSON_VALUE)
    @IdempotentEndpoint
    public Flux<Map<String, Object>> lines(@PathVariable String id) {
      return sends(id);
    }

    @PostMapping(path = "/gated/array/{id}", produces = MediaType.APPLICATION_JSON_VALUE)
    @IdempotentEndpoint
    public Flux<Map<String, Object>> array(@PathVariable String id) {
      return sends(id);
    }
  }
}
