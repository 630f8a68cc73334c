package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.web.WebFluxStreamClientGoneStepsRedisProbeTest.GatedStreams;
import java.io.InputStream;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Probe (probeF, of fixflux 877abbdc): a guarded WebFlux stream served over HTTP/2 (h2c, {@code
 * server.http2.enabled}), whose client (the JDK's HttpClient) closes the body after the first
 * element: on HTTP/2 it cancels that stream (not checked here whether the connection itself stays
 * open; the retry asks for HTTP/2 and must get it). The write's end now also comes from the close
 * of the response's Netty channel ({@code ReactiveConnections.closed}); on HTTP/2 that is the
 * stream's channel, not the connection's. The key must be answered from the store after the
 * handler's stream ended (SPEC 1, 13, 18): one run, its three sends made once, never left in
 * progress.
 */
class WebFluxStreamHttp2ResetProbeTest extends WebFluxProbeSupport {

  private static final HttpClient H2 =
      HttpClient.newBuilder()
          .version(HttpClient.Version.HTTP_2)
          .connectTimeout(Duration.ofSeconds(10))
          .build();

  @BeforeAll
  static void start() {
    start(
        Map.of("idempotency.store", "memory", "server.http2.enabled", "true"), GatedStreams.class);
  }

  @Test
  void aStreamResetOnAConnectionKeptOpenIsAnsweredFromTheStore() throws Exception {
    // the h2c upgrade is made on a first request; the streams below come on that connection
    HttpResponse<String> warmUp =
        H2.send(
            h2(post("/delayed/" + UUID.randomUUID() + "/0", UUID.randomUUID().toString())),
            HttpResponse.BodyHandlers.ofString());
    List<String> problems = new ArrayList<>();
    for (String kind : List.of("events", "lines")) {
      String id = UUID.randomUUID().toString();
      String key = UUID.randomUUID().toString();
      String path = "/gated/" + kind + "/" + id;
      GatedStreams.open(id, 0);
      HttpResponse<InputStream> first =
          H2.send(h2(post(path, key)), HttpResponse.BodyHandlers.ofInputStream());
      String read;
      try (InputStream body = first.body()) {
        read = readUntil(body, "\"n\":0");
      } // closed early: the client resets its stream, the connection stays
      boolean gaveUp = watch.gone(path).await(WAIT_SECONDS, TimeUnit.SECONDS);
      for (int step = 1; step <= 3; step++) {
        GatedStreams.open(id, step);
      }
      awaitEnded(id);
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      HttpResponse<String> retry =
          H2.send(h2(post(path, key)), HttpResponse.BodyHandlers.ofString());
      while (retry.statusCode() == 409 && System.nanoTime() < deadline) {
        Thread.sleep(20);
        retry = H2.send(h2(post(path, key)), HttpResponse.BodyHandlers.ofString());
      }
      int runs = Probes.runs(id).get();
      int sent = Streams.sent(id).get();
      boolean answered =
          (retry.statusCode() == 200 && replayed(retry)) || retry.statusCode() == 422;
      boolean onHttp2 =
          first.version() == HttpClient.Version.HTTP_2
              && retry.version() == HttpClient.Version.HTTP_2;
      if (!onHttp2 || !read.contains("\"n\":0") || runs != 1 || sent != 3 || !answered) {
        problems.add(
            kind
                + ": warm-up "
                + warmUp.version()
                + ", stream "
                + first.version()
                + " read n:0 "
                + read.contains("\"n\":0")
                + ", server gave up "
                + gaveUp
                + ", "
                + runs
                + " runs, "
                + sent
                + " sends, stream "
                + Streams.ended.get(id)
                + ", retry 10 s after its end "
                + retry.version()
                + " "
                + retry.statusCode()
                + " replayed="
                + replayed(retry)
                + " "
                + retry.body());
      }
    }
    assertThat(problems).isEmpty();
  }

  private static HttpRequest h2(HttpRequest request) {
    return HttpRequest.newBuilder(request, (name, value) -> true)
        .version(HttpClient.Version.HTTP_2)
        .build();
  }

  /** Reads the body (at most 20 s) until {@code expected} has come; returns what was read. */
  private static String readUntil(InputStream body, String expected) throws Exception {
    StringBuilder read = new StringBuilder();
    byte[] buffer = new byte[4096];
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (read.indexOf(expected) < 0 && System.nanoTime() < deadline) {
      int n = body.read(buffer);
      if (n < 0) {
        break;
      }
      read.append(new String(buffer, 0, n, StandardCharsets.UTF_8));
    }
    return read.toString();
  }
}
