package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.reactive.BlockingCalls;
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
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.springframework.http.MediaType;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * Issue 39 probe (probeC): a WebFlux endpoint whose handler answers on another scheduler ({@code
 * publishOn(parallel)}, {@code publishOn(boundedElastic)}) and many keys at once, each requested
 * several times concurrently, with BlockHound on. SPEC 1 and 18: one run per key, every other
 * request in progress (409) or a replay of that run's answer, no key left in progress, and the
 * event loop free (an unguarded {@code /ping} answers while the sends are held up). Each subclass
 * picks a store.
 */
abstract class WebFluxOtherSchedulerProbeSupport extends WebFluxProbeSupport {

  @RestController
  public static class OtherSchedulers {
    /** A send whose answer arrives on Reactor's {@code parallel} scheduler. */
    @PostMapping(path = "/parallel/{id}/{ms}", produces = MediaType.APPLICATION_JSON_VALUE)
    @IdempotentEndpoint
    public Mono<Map<String, Object>> parallel(@PathVariable String id, @PathVariable long ms) {
      return Mono.defer(
              () -> {
                int run = Probes.runs(id).incrementAndGet();
                return Mono.delay(Duration.ofMillis(ms))
                    .map(ignored -> Map.<String, Object>of("receipt", "r-" + id, "run", run));
              })
          .publishOn(Schedulers.parallel());
    }

    /** A send whose answer arrives on Reactor's {@code boundedElastic} scheduler. */
    @PostMapping(path = "/elastic/{id}/{ms}", produces = MediaType.APPLICATION_JSON_VALUE)
    @IdempotentEndpoint
    public Mono<Map<String, Object>> elastic(@PathVariable String id, @PathVariable long ms) {
      return Mono.defer(
              () -> {
                int run = Probes.runs(id).incrementAndGet();
                return Mono.delay(Duration.ofMillis(ms))
                    .map(ignored -> Map.<String, Object>of("receipt", "r-" + id, "run", run));
              })
          .publishOn(Schedulers.boundedElastic());
    }

    /** Not guarded: answers at once when the event loop is free. */
    @GetMapping("/ping")
    public Mono<String> ping() {
      return Mono.just("pong");
    }
  }

  @AfterEach
  void nothingBlockedANonBlockingThread() {
    BlockingCalls.assertNoneFromTheSdk();
  }

  @Test
  void manyKeysAnsweredOnTheParallelSchedulerRunOnceEach() throws Exception {
    manyKeysRunOnceEach("parallel");
  }

  @Test
  void manyKeysAnsweredOnTheBoundedElasticSchedulerRunOnceEach() throws Exception {
    manyKeysRunOnceEach("elastic");
  }

  private static void manyKeysRunOnceEach(String route) throws Exception {
    int keys = 40;
    int perKey = 3;
    List<String> ids = new ArrayList<>();
    List<String> paths = new ArrayList<>();
    List<String> idemKeys = new ArrayList<>();
    List<CompletableFuture<HttpResponse<String>>> first = new ArrayList<>();
    for (int k = 0; k < keys; k++) {
      String id = UUID.randomUUID().toString();
      ids.add(id);
      paths.add("/" + route + "/" + id + "/300");
      idemKeys.add(UUID.randomUUID().toString());
    }
    for (int n = 0; n < perKey; n++) {
      for (int k = 0; k < keys; k++) {
        first.add(
            CLIENT.sendAsync(
                post(paths.get(k), idemKeys.get(k)), HttpResponse.BodyHandlers.ofString()));
      }
    }
    // the event loop is not held by the sends waiting on their provider
    long started = System.nanoTime();
    HttpResponse<String> ping =
        CLIENT.send(
            HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/ping"))
                .timeout(Duration.ofSeconds(WAIT_SECONDS))
                .GET()
                .build(),
            HttpResponse.BodyHandlers.ofString());
    long pingMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);
    List<HttpResponse<String>> answered = new ArrayList<>();
    for (CompletableFuture<HttpResponse<String>> response : first) {
      answered.add(response.get(WAIT_SECONDS, TimeUnit.SECONDS));
    }
    List<HttpResponse<String>> retries = new ArrayList<>();
    for (int k = 0; k < keys; k++) {
      retries.add(retry(paths.get(k), idemKeys.get(k)));
    }

    assertThat(ping.body()).isEqualTo("pong");
    assertThat(pingMillis).as("/ping while %d sends wait", keys * perKey).isLessThan(10_000);
    assertThat(answered)
        .allSatisfy(
            r ->
                assertThat(r.statusCode() == 200 || r.statusCode() == 409 || r.statusCode() == 503)
                    .as("%s %s", r.statusCode(), r.body())
                    .isTrue());
    for (int k = 0; k < keys; k++) {
      HttpResponse<String> retried = retries.get(k);
      assertThat(retried.statusCode()).as(retried.body()).isEqualTo(200);
      assertThat(replayed(retried)).as("the retry of key %d replays", k).isTrue();
      assertThat(retried.body()).contains("\"run\":1").contains("r-" + ids.get(k));
      assertThat(Probes.runs(ids.get(k)).get()).as("runs of key %d", k).isEqualTo(1);
    }
  }
}
