package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.web.MvcProbes.HeldSends;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;

/**
 * probeE: 16 concurrent repeats of one key, sent in waves around the moment the first request's
 * container async timeout (1 s) fires while its send is held. SPEC 1, 13: every repeat gets 409
 * (never a second handler run, never a replay of something else) while the send runs; after it,
 * each retry gets the first run's response replayed. One handler run per key.
 */
@SpringBootTest(
    classes = MvcProbes.HeldSendApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
    properties = {
      "idempotency.store=memory",
      "spring.mvc.async.request-timeout=1s",
      "idempotency.close-grace-period=1s"
    })
class MvcTimeoutConcurrentRepeatsProbeTest implements EndpointClient {

  private static final ExecutorService CLIENTS = Executors.newFixedThreadPool(17);

  @LocalServerPort int port;

  @Override
  public int port() {
    return port;
  }

  @Override
  public int runs() {
    return HeldSends.runs.get();
  }

  @BeforeEach
  void reset() {
    HeldSends.gate = new CountDownLatch(1);
  }

  @AfterAll
  static void stopClients() {
    CLIENTS.shutdownNow();
  }

  @ParameterizedTest
  @ValueSource(strings = {"callable", "future", "deferred"})
  void sixteenRepeatsAroundTheTimeoutAllGet409ThenTheReplay(String kind) throws Exception {
    String key = EndpointClient.newKey();
    String path = "/probe/held/" + kind;
    int before = HeldSends.runs.get();
    List<String> unexpected = new ArrayList<>();
    HttpResponse<byte[]> first;
    try {
      Future<HttpResponse<byte[]>> firstCall = CLIENTS.submit(() -> post(path, key, "{}"));
      MvcProbes.awaitHandlerStart(HeldSends.runs::get, before);
      long startedAt = System.nanoTime();
      // waves of 16 concurrent repeats from 0.7 s to 1.6 s after the handler started
      while (!firstCall.isDone()
          || System.nanoTime() - startedAt < Duration.ofMillis(1600).toNanos()) {
        if (System.nanoTime() - startedAt < Duration.ofMillis(700).toNanos()) {
          Thread.sleep(10);
          continue;
        }
        List<Future<HttpResponse<byte[]>>> wave = new ArrayList<>();
        for (int i = 0; i < 16; i++) {
          wave.add(CLIENTS.submit(() -> post(path, key, "{}")));
        }
        for (Future<HttpResponse<byte[]>> repeat : wave) {
          HttpResponse<byte[]> answer = repeat.get(60, TimeUnit.SECONDS);
          if (answer.statusCode() != 409) {
            unexpected.add(answer.statusCode() + " " + EndpointClient.text(answer));
          }
        }
        if (System.nanoTime() - startedAt > Duration.ofSeconds(10).toNanos()) {
          break;
        }
      }
      first = firstCall.get(60, TimeUnit.SECONDS);
    } finally {
      HeldSends.gate.countDown();
    }
    List<Future<HttpResponse<byte[]>>> after = new ArrayList<>();
    for (int i = 0; i < 16; i++) {
      after.add(CLIENTS.submit(() -> MvcProbes.retryWhileInProgress(this, path, key)));
    }
    List<String> replays = new ArrayList<>();
    for (Future<HttpResponse<byte[]>> retry : after) {
      HttpResponse<byte[]> answer = retry.get(60, TimeUnit.SECONDS);
      replays.add(
          answer.statusCode()
              + " "
              + EndpointClient.header(answer, "Idempotent-Replayed")
              + " "
              + EndpointClient.text(answer));
    }
    String answers =
        String.format(
            "first %s; non-409 while sending %s; after %s",
            first.statusCode(), unexpected, replays);
    assertThat(first.statusCode()).as(answers).isEqualTo(409);
    assertThat(HeldSends.runs.get() - before).as("handler runs (%s)", answers).isEqualTo(1);
    assertThat(unexpected).as(answers).isEmpty();
    assertThat(replays)
        .as(answers)
        .allSatisfy(
            replay ->
                assertThat(replay).startsWith("201 true ").contains("sent-" + (before + 1) + "\""));
  }
}
