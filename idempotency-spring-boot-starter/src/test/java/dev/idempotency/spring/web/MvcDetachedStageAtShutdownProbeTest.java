package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.testservers.Poll;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.context.request.async.DeferredResult;

/**
 * probeE, of fixstage (4e0a736f), the shutdown side: a handler's own {@code CompletableFuture} (no
 * {@code Callable}), completed by an application thread after the request's 1 s async timeout with
 * a {@code DeferredResult} of no timeout of its own, which the starter then awaits (up to 30 s, the
 * request's async timeout not read) on its taken-over pool; that result's thread sends at once and
 * sets it only after the close. The application is closed during that wait (close grace 3 s, one
 * graceful phase of 1 s): the close must not hang on the wait (the continuation is kept where the
 * close grace reaches it: {@code AsyncWork.takenOverGraceRunsOut}), and the key must not be
 * released: the retry after a restart on the same Redis (within the 60 s lease) must not send again
 * (SPEC 1), and the call must have been recorded within the close grace (422, answered without its
 * body when the grace ran out), not left in progress as a crash leaves it (409 until the lease runs
 * out). Two application starts: tagged extended.
 *
 * <p>Passes at 4de4bf36 on Boot 3.5 and 4.0, twice each (once with 409 still accepted, once as now,
 * 422 only); 67 to 205 s on a machine at a load average of 17 to 60, mostly the two starts.
 */
class MvcDetachedStageAtShutdownProbeTest implements EndpointClient {

  private static final String PATH = "/probeE/shutdown/stage-later-deferred";

  private int port;

  @Override
  public int port() {
    return port;
  }

  @Override
  public int runs() {
    return StageAtShutdown.entered.get();
  }

  private static ConfigurableApplicationContext start() {
    return MvcProbes.startOn(
        StageAtShutdownApplication.class,
        "redis",
        new CountDownLatch(1),
        "spring.lifecycle.timeout-per-shutdown-phase=1s",
        "spring.mvc.async.request-timeout=1s",
        "idempotency.close-grace-period=3s",
        "idempotency.lease=60s");
  }

  @Tag("extended")
  @Test
  void aDetachedStagesLaterDeferredResultAwaitedAtShutdownIsNotSentAgain() throws Exception {
    String key = EndpointClient.newKey();
    CountDownLatch gate = new CountDownLatch(1);
    CountDownLatch late = new CountDownLatch(1);
    StageAtShutdown.gate = gate;
    StageAtShutdown.late = late;
    ConfigurableApplicationContext first = start();
    String firstAnswer;
    long closeMillis;
    try {
      port = MvcProbes.portOf(first);
      HttpResponse<byte[]> answer = post(PATH, key, "{}");
      firstAnswer = MvcProbes.replayed(answer);
      gate.countDown(); // the stage completes with its DeferredResult, whose thread sends
      Poll.within(Duration.ofSeconds(30))
          .until("the later stage sent: " + firstAnswer, () -> StageAtShutdown.sendsOf(key) == 1);
      long closing = System.nanoTime();
      CompletableFuture.runAsync(first::close).get(60, TimeUnit.SECONDS);
      closeMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - closing);
    } finally {
      gate.countDown();
      late.countDown(); // sets the DeferredResult, after the close
    }
    HttpResponse<byte[]> retry;
    try (ConfigurableApplicationContext second = start()) {
      port = MvcProbes.portOf(second);
      retry = post(PATH, key, "{}");
    }
    String seen =
        String.format(
            "first answer %s; close took %d ms; retry after the restart %s; sends %d",
            firstAnswer, closeMillis, MvcProbes.replayed(retry), StageAtShutdown.sendsOf(key));
    assertThat(firstAnswer).as(seen).startsWith("409");
    assertThat(StageAtShutdown.sendsOf(key)).as("sends: " + seen).isEqualTo(1);
    assertThat(retry.statusCode()).as("the retry: " + seen).isEqualTo(422);
    assertThat(closeMillis).as("the close: " + seen).isLessThan(15_000);
  }

  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(StageAtShutdown.class)
  static class StageAtShutdownApplication {}

  @RestController
  static class StageAtShutdown {
    static final AtomicInteger entered = new AtomicInteger();
    static final Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();
    static volatile CountDownLatch gate = new CountDownLatch(0);
    static volatile CountDownLatch late = new CountDownLatch(0);

    static int sendsOf(String key) {
      AtomicInteger n = sends.get(key);
      return n == null ? 0 : n.get();
    }

    /**
     * A stage completed once the gate opens (30 s at most) with a DeferredResult (no timeout of its
     * own, no timeout result) whose thread sends at once and sets it only once {@code late} opens.
     */
    @PostMapping(PATH)
    @IdempotentEndpoint
    public CompletableFuture<DeferredResult<String>> stageLaterDeferred(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      CountDownLatch held = gate;
      CountDownLatch setLate = late;
      CompletableFuture<DeferredResult<String>> stage = new CompletableFuture<>();
      Thread thread =
          new Thread(
              () -> {
                try {
                  held.await(30, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                  Thread.currentThread().interrupt();
                }
                DeferredResult<String> deferred = new DeferredResult<>();
                stage.complete(deferred);
                int n = sends.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
                try {
                  setLate.await(60, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                  Thread.currentThread().interrupt();
                }
                deferred.setResult("sent-" + n);
              },
              "probeE-stage");
      thread.setDaemon(true);
      thread.start();
      return stage;
    }
  }
}
