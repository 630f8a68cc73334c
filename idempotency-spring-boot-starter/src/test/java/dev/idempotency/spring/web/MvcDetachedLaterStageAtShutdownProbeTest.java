package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.testservers.Poll;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.Callable;
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
 * probeC, of fixlater (366e5d42), the shutdown side its author did not test: a {@code Callable}
 * still running at the request's 1 s async timeout (detached, not taken over) returns, after it, a
 * {@code DeferredResult} with a timeout of its own (60 s) that an application thread sets only
 * after it sent, and late: the starter awaits it on its taken-over pool ({@code
 * AsyncWork.continuedDetached}). The application is closed while that wait goes on (close grace 3
 * s, one graceful phase of 1 s). The close must not hang on the wait, and the key must not be
 * released: the retry after a restart on the same Redis (within the 60 s lease) must not send again
 * (SPEC 1): 422 (recorded as answered without its body when the grace ran out) or 409 (left as a
 * crash leaves a call). Two application starts: tagged extended.
 *
 * <p>Passes on Boot 3.5 (15 to 22 s) and 4.0 (17 to 19 s) at 7340e92a, twice each: the close took
 * about 2.1 s and the retry after the restart got 422 response-not-stored, one send.
 */
class MvcDetachedLaterStageAtShutdownProbeTest implements EndpointClient {

  private static final String PATH = "/probeC/shutdown/later-deferred";

  private int port;

  @Override
  public int port() {
    return port;
  }

  @Override
  public int runs() {
    return LaterAtShutdown.entered.get();
  }

  private static ConfigurableApplicationContext start() {
    return MvcProbes.startOn(
        LaterAtShutdownApplication.class,
        "redis",
        new CountDownLatch(1),
        "spring.lifecycle.timeout-per-shutdown-phase=1s",
        "spring.mvc.async.request-timeout=1s",
        "idempotency.close-grace-period=3s",
        "idempotency.lease=60s");
  }

  @Tag("extended")
  @Test
  void aDetachedCallablesLaterDeferredResultAwaitedAtShutdownIsNotSentAgain() throws Exception {
    String key = EndpointClient.newKey();
    CountDownLatch gate = new CountDownLatch(1);
    CountDownLatch late = new CountDownLatch(1);
    LaterAtShutdown.gate = gate;
    LaterAtShutdown.late = late;
    ConfigurableApplicationContext first = start();
    String firstAnswer;
    long closeMillis;
    try {
      port = MvcProbes.portOf(first);
      HttpResponse<byte[]> answer = post(PATH, key, "{}");
      firstAnswer = MvcProbes.replayed(answer);
      gate.countDown(); // the detached Callable returns its DeferredResult, whose thread sends
      Poll.within(Duration.ofSeconds(30))
          .until("the later stage sent: " + firstAnswer, () -> LaterAtShutdown.sendsOf(key) == 1);
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
            firstAnswer, closeMillis, MvcProbes.replayed(retry), LaterAtShutdown.sendsOf(key));
    assertThat(firstAnswer).as(seen).startsWith("409");
    assertThat(LaterAtShutdown.sendsOf(key)).as("sends: " + seen).isEqualTo(1);
    assertThat(retry.statusCode()).as("the retry: " + seen).isIn(409, 422);
  }

  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(LaterAtShutdown.class)
  static class LaterAtShutdownApplication {}

  @RestController
  static class LaterAtShutdown {
    static final AtomicInteger entered = new AtomicInteger();
    static final Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();
    static volatile CountDownLatch gate = new CountDownLatch(0);
    static volatile CountDownLatch late = new CountDownLatch(0);

    static int sendsOf(String key) {
      AtomicInteger n = sends.get(key);
      return n == null ? 0 : n.get();
    }

    /**
     * Held (30 s at most) past the timeout by the gate; returns a DeferredResult (60 s timeout, no
     * timeout result) whose thread sends at once and sets it only once {@code late} opens.
     */
    @PostMapping(PATH)
    @IdempotentEndpoint
    public Callable<DeferredResult<String>> laterDeferred(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      CountDownLatch held = gate;
      CountDownLatch setLate = late;
      return () -> {
        held.await(30, TimeUnit.SECONDS);
        DeferredResult<String> deferred = new DeferredResult<>(60_000L);
        Thread thread =
            new Thread(
                () -> {
                  int n = sends.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
                  try {
                    setLate.await(60, TimeUnit.SECONDS);
                  } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                  }
                  deferred.setResult("sent-" + n);
                },
                "probeC-later");
        thread.setDaemon(true);
        thread.start();
        return deferred;
      };
    }
  }
}
