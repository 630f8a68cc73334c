package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.web.WebFluxStreamClientGoneStepsRedisProbeTest.GatedStreams;
import java.io.IOException;
import java.io.OutputStream;
import java.net.Socket;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Probe (probeF, of fixflux 877abbdc): a guarded WebFlux stream's write now also ends at its
 * connection's close ({@code ReactiveConnections.closed}), its watch cancelled once the write
 * ended. Here the connection is kept alive: a first stream (server-sent events) is read to its end,
 * then a second request comes on the same connection, whose client then goes away (a reset). The
 * first stream's watch must not leak into the second (the first answered from the store, one run),
 * and the second, a stream or a single value ({@code Mono}), must be answered from the store after
 * its handler ended (SPEC 1, 13, 18): one run, every send made once, no key left in progress.
 */
class WebFluxStreamKeepAliveProbeTest extends WebFluxProbeSupport {

  @BeforeAll
  static void start() {
    start(Map.of("idempotency.store", "memory"), GatedStreams.class);
  }

  @Test
  void aSecondRequestOnAKeptAliveConnectionWhoseClientGoesAwayIsAnsweredFromTheStore()
      throws Exception {
    List<String> problems = new ArrayList<>();
    for (String second : List.of("events", "lines", "held")) {
      String firstId = UUID.randomUUID().toString();
      String firstKey = UUID.randomUUID().toString();
      String firstPath = "/gated/events/" + firstId;
      String id = UUID.randomUUID().toString();
      String key = UUID.randomUUID().toString();
      String path = second.equals("held") ? "/held/" + id : "/gated/" + second + "/" + id;
      boolean firstWhole;
      boolean gaveUp;
      try (Socket client = ClientGoneWatch.post(port, firstPath, firstKey)) {
        for (int step = 0; step <= 3; step++) {
          GatedStreams.open(firstId, step);
        }
        // the chunked response's last chunk: the first exchange is over, the connection kept
        firstWhole = readUntil(client, "\r\n0\r\n\r\n").contains("\"n\":2");
        awaitEnded(firstId);
        send(client, path, key);
        if (second.equals("held")) {
          await(Probes.runs(id), 1); // the handler runs, its answer not yet given
        } else {
          await(Probes.runs(id), 1);
          GatedStreams.open(id, 0);
          readUntil(client, "\"n\":0");
        }
        client.setSoLinger(true, 0); // a reset with the close below
      }
      if (second.equals("held")) {
        Probes.answer(id).tryEmitValue("r-" + id);
        gaveUp = true; // nothing was written before the client went away
      } else {
        gaveUp = watch.gone(path).await(WAIT_SECONDS, TimeUnit.SECONDS);
        for (int step = 1; step <= 3; step++) {
          GatedStreams.open(id, step);
        }
        awaitEnded(id);
      }
      // ten seconds: more than three leases (3 s), renewed while the key is in progress
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      HttpResponse<String> retry =
          CLIENT.send(post(path, key), HttpResponse.BodyHandlers.ofString());
      while (retry.statusCode() == 409 && System.nanoTime() < deadline) {
        Thread.sleep(20);
        retry = CLIENT.send(post(path, key), HttpResponse.BodyHandlers.ofString());
      }
      HttpResponse<String> firstRetry = retry(firstPath, firstKey);
      int runs = Probes.runs(id).get();
      int firstRuns = Probes.runs(firstId).get();
      int sent = second.equals("held") ? runs : Streams.sent(id).get();
      int expectedSent = second.equals("held") ? 1 : 3;
      boolean answered =
          (retry.statusCode() == 200 && replayed(retry)) || retry.statusCode() == 422;
      boolean firstReplayed = firstRetry.statusCode() == 200 && replayed(firstRetry);
      if (!firstWhole
          || !gaveUp
          || runs != 1
          || firstRuns != 1
          || sent != expectedSent
          || !answered
          || !firstReplayed) {
        problems.add(
            second
                + ": first stream read whole "
                + firstWhole
                + ", first runs "
                + firstRuns
                + ", first retry "
                + firstRetry.statusCode()
                + " replayed="
                + replayed(firstRetry)
                + "; second: server gave up "
                + gaveUp
                + ", "
                + runs
                + " runs, "
                + sent
                + " sends, retry 10 s after its end "
                + retry.statusCode()
                + " replayed="
                + replayed(retry)
                + " "
                + retry.body());
      }
    }
    assertThat(problems).isEmpty();
  }

  private static void send(Socket client, String path, String key) throws IOException {
    OutputStream out = client.getOutputStream();
    out.write(
        ("POST "
                + path
                + " HTTP/1.1\r\nHost: 127.0.0.1\r\nIdempotency-Key: "
                + key
                + "\r\nContent-Length: 0\r\n\r\n")
            .getBytes(StandardCharsets.US_ASCII));
    out.flush();
  }

  /** Reads the response (at most 20 s) until {@code expected} has come; returns what was read. */
  private static String readUntil(Socket client, String expected) throws Exception {
    StringBuilder read = new StringBuilder();
    byte[] buffer = new byte[4096];
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (read.indexOf(expected) < 0 && System.nanoTime() < deadline) {
      int n = client.getInputStream().read(buffer);
      if (n < 0) {
        break;
      }
      read.append(new String(buffer, 0, n, StandardCharsets.UTF_8));
    }
    return read.toString();
  }
}
