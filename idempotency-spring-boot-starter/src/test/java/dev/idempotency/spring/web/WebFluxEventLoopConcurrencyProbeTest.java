package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * probeY: the WebFlux call on the request's event loop (673470c) with many requests of one key at
 * once, over real HTTP on Reactor Netty, in memory (the Redis subclass: on the embedded Redis). The
 * bodies are one JSON document written three ways (members in another order, white space), so the
 * streamed fingerprint must give all of them the same value: no 422. One run; exactly one request
 * answered by it; every later request replays its answer.
 */
class WebFluxEventLoopConcurrencyProbeTest extends WebFluxProbeSupport {

  private static final List<String> BODIES =
      List.of(
          "{\"to\":\"+100\",\"text\":\"hi\",\"n\":[1,2.50,1e2]}",
          "{\"n\":[1,2.5,100],\"text\":\"hi\",\"to\":\"+100\"}",
          " {\n \"text\" : \"h\\u0069\" , \"to\":\"+100\", \"n\" : [ 1.0, 25e-1, 1.00E2 ] }\n");

  @BeforeAll
  static void start() {
    start(Map.of("idempotency.store", "memory"));
  }

  @Test
  void sixtyFourRequestsOfOneKeyRunOnceAndAllReplayTheSameAnswer() throws Exception {
    String id = UUID.randomUUID().toString();
    String key = UUID.randomUUID().toString();
    String path = "/delayed/" + id + "/400";
    List<CompletableFuture<HttpResponse<String>>> first = new ArrayList<>();
    for (int i = 0; i < 64; i++) {
      first.add(CLIENT.sendAsync(json(path, key, BODIES.get(i % 3)), ofString()));
    }
    List<HttpResponse<String>> answered = new ArrayList<>();
    for (CompletableFuture<HttpResponse<String>> response : first) {
      answered.add(response.get(WAIT_SECONDS, TimeUnit.SECONDS));
    }
    await(Probes.runs(id), 1);
    List<HttpResponse<String>> repeats = new ArrayList<>();
    for (int i = 0; i < 64; i++) {
      repeats.add(retryJson(path, key, BODIES.get(i % 3)));
    }

    assertThat(answered)
        .allSatisfy(
            r ->
                assertThat(r.statusCode() == 200 || r.statusCode() == 409)
                    .as("%s %s", r.statusCode(), r.body())
                    .isTrue());
    List<HttpResponse<String>> sent =
        answered.stream().filter(r -> r.statusCode() == 200 && !replayed(r)).toList();
    assertThat(sent).as("one request answered by the run").hasSize(1);
    assertThat(repeats)
        .allSatisfy(
            r -> {
              assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
              assertThat(replayed(r)).isTrue();
              assertThat(r.body()).isEqualTo(sent.get(0).body());
            });
    assertThat(Probes.runs(id).get()).as("64 requests, one key: one run").isEqualTo(1);
  }

  private static HttpResponse.BodyHandler<String> ofString() {
    return HttpResponse.BodyHandlers.ofString();
  }

  static HttpRequest json(String path, String key, String body) {
    return HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
        .timeout(Duration.ofSeconds(WAIT_SECONDS))
        .header("Idempotency-Key", key)
        .header("Content-Type", "application/json")
        .POST(HttpRequest.BodyPublishers.ofString(body))
        .build();
  }

  /** The request again (bounded) while the first is still in flight. */
  static HttpResponse<String> retryJson(String path, String key, String body) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_SECONDS);
    HttpResponse<String> retry = CLIENT.send(json(path, key, body), ofString());
    while ((retry.statusCode() == 409 || retry.statusCode() == 503)
        && System.nanoTime() < deadline) {
      Thread.sleep(20);
      retry = CLIENT.send(json(path, key, body), ofString());
    }
    return retry;
  }
}
