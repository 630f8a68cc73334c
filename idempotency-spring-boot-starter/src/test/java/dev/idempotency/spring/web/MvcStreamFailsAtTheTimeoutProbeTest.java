package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.testservers.Poll;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.context.request.NativeWebRequest;
import org.springframework.web.context.request.async.CallableProcessingInterceptor;
import org.springframework.web.context.request.async.WebAsyncUtils;
import org.springframework.web.servlet.HandlerInterceptor;
import org.springframework.web.servlet.config.annotation.InterceptorRegistry;
import org.springframework.web.servlet.config.annotation.WebMvcConfigurer;
import org.springframework.web.servlet.mvc.method.annotation.StreamingResponseBody;

/**
 * Probe (probeK) of fixstream (618c0a7: "its own failure before any write releases the key") at the
 * edge of the container async timeout (2 s): a {@code StreamingResponseBody} fails with its own
 * error (its provider refused: nothing sent, nothing written) just before the timeout, and the
 * timeout comes before Spring MVC dispatches that failure. The window is held open, so that the
 * order is deterministic, by an application's per-request {@code CallableProcessingInterceptor}
 * (registered by a {@code HandlerInterceptor} of the application, which runs before the starter's
 * at {@code LOWEST_PRECEDENCE}, so its {@code postProcess} runs after the starter's), whose {@code
 * postProcess} is slow: it returns once it saw the timeout (at most 10 s), as a metrics or tracing
 * interceptor that flushes to a slow backend might. One application on a real Redis.
 */
class MvcStreamFailsAtTheTimeoutProbeTest extends MvcProbeApplication {

  MvcStreamFailsAtTheTimeoutProbeTest() {
    super(EdgeApplication.class, "spring.mvc.async.request-timeout=1s");
  }

  @Override
  public int runs() {
    return EdgeStreams.entered.get();
  }

  /**
   * Was an open finding (medium: a lost send for the window, SPEC 1), probeK; fixed by fixlater:
   * {@code AsyncWork.awaitStreamEnd} no longer refuses a stream whose end came already (its early
   * result): that end decides at once, its own failure before any write releasing the key. It was:
   * The stream's own failure, before it wrote and before the timeout: nothing was sent, so the key
   * must be released and the retry send, once (the retry's request is not slowed). The starter's
   * {@code postProcess} sees the failure first ({@code AsyncWork.lateResult} keeps it as the work's
   * early result); the timeout then comes before its dispatch, and {@code
   * TimeoutDecision.cutAStream} cannot await the stream's end ({@code AsyncWork.awaitStreamEnd}
   * refuses once an early result came), so it cuts the stream short: recorded as answered without
   * its body from Spring's 503, though the result it already holds is the stream's own failure
   * before any write (for a {@code Callable} the early result is stored or answered instead: {@code
   * detachWithEarlyResult}). Without the slow interceptor the same order happens when the stream
   * fails within the moment before its timeout. Fails on Boot 3.5 and 4.0, commit 44d14d3 (about 2
   * s): "sends: first answer 503 ...; retry 422 ...(status 503)...; runs 1, stream failures 1,
   * sends 0, timeout seen in postProcess 1 expected: 1 but was: 0". Without the warm-up request it
   * passed twice: the cold first request's work began only after its timeout, was abandoned, and
   * released.
   */
  @Test
  void aStreamThatFailsJustBeforeTheTimeoutIsSentByTheRetry() throws Exception {
    // a warm-up request (its own key, neither slowed nor failing): a cold first request's work may
    // begin only after its timeout, which then abandons it before it runs (nothing to probe)
    HttpResponse<byte[]> warmUp = post("/probeK/edge", EndpointClient.newKey(), "{}");
    assertThat(warmUp.statusCode()).as("the warm-up").isEqualTo(201);
    String key = EndpointClient.newKey();
    EdgeStreams.failing.put(key, new AtomicInteger(1));
    EdgeStreams.slowOnce.put(key, true); // the first request only
    int before = runs();
    CompletableFuture<HttpResponse<byte[]>> first = MvcProbes.postAsync(this, "/probeK/edge", key);
    String firstAnswer = MvcProbes.answerOf(first);
    Poll.within(Duration.ofSeconds(20))
        .until(
            "the slow postProcess ended", () -> EdgeStreams.count(EdgeStreams.slowEnded, key) == 1);
    HttpResponse<byte[]> retry = MvcProbes.retryWhileInProgress(this, "/probeK/edge", key);
    String seen =
        String.format(
            "first answer %s; retry %s; runs %d, stream failures %d, sends %d, timeout seen in"
                + " postProcess %d",
            firstAnswer,
            MvcProbes.replayed(retry),
            runs() - before,
            EdgeStreams.count(EdgeStreams.refused, key),
            EdgeStreams.count(EdgeStreams.sends, key),
            EdgeStreams.count(EdgeStreams.timeoutSeen, key));
    assertThat(EdgeStreams.count(EdgeStreams.refused, key))
        .as("the first request's stream ran and failed: " + seen)
        .isEqualTo(1);
    assertThat(EdgeStreams.count(EdgeStreams.sends, key)).as("sends: " + seen).isEqualTo(1);
    assertThat(retry.statusCode()).as(seen).isEqualTo(201);
  }

  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(EdgeStreams.class)
  static class EdgeApplication {
    /** The application's own interceptor, registered per request, slow in its postProcess. */
    @Bean
    WebMvcConfigurer slowPostProcess() {
      return new WebMvcConfigurer() {
        @Override
        public void addInterceptors(InterceptorRegistry registry) {
          registry.addInterceptor(
              new HandlerInterceptor() {
                @Override
                public boolean preHandle(
                    HttpServletRequest request, HttpServletResponse response, Object handler) {
                  String key = request.getHeader("Idempotency-Key");
                  if (key != null
                      && request.getRequestURI().endsWith("/probeK/edge")
                      && EdgeStreams.slowOnce.remove(key) != null) {
                    WebAsyncUtils.getAsyncManager(request)
                        .registerCallableInterceptor("probeK-slow", new SlowPostProcess(key));
                  }
                  return true;
                }
              });
        }
      };
    }
  }

  /**
   * Returns from postProcess on Spring MVC's task thread once it saw the request's timeout (at most
   * 10 s); at once on the starter's thread.
   */
  static final class SlowPostProcess implements CallableProcessingInterceptor {
    private final String key;
    private final CountDownLatch timedOut = new CountDownLatch(1);

    SlowPostProcess(String key) {
      this.key = key;
    }

    @Override
    public <T> Object handleTimeout(NativeWebRequest request, Callable<T> task) {
      timedOut.countDown();
      return RESULT_NONE;
    }

    @Override
    public <T> void postProcess(NativeWebRequest request, Callable<T> task, Object result) {
      if (Thread.currentThread().getName().startsWith("idempotent-endpoint-")) {
        // the starter runs the request's interceptors on its own thread too, around the work
        // (TaskThreadContext): the device delays only the dispatch, on Spring MVC's task thread,
        // so that the work's failure is the early result before the timeout, as the probe means
        return;
      }
      // Spring MVC interrupts the task's thread at the timeout (it cancels the task): waited for
      // all the same, as a flush that does not heed interrupts would
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      boolean seen = false;
      while (!seen && System.nanoTime() < deadline) {
        try {
          seen = timedOut.await(100, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
          // go on waiting
        }
      }
      if (seen) {
        EdgeStreams.bump(EdgeStreams.timeoutSeen, key);
      }
      EdgeStreams.bump(EdgeStreams.slowEnded, key);
    }
  }

  /** A stream whose provider refuses (nothing sent) as many times as the key is failing. */
  @RestController
  static class EdgeStreams {
    static final AtomicInteger entered = new AtomicInteger();
    static final Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();
    static final Map<String, AtomicInteger> failing = new ConcurrentHashMap<>();
    static final Map<String, AtomicInteger> timeoutSeen = new ConcurrentHashMap<>();
    static final Map<String, AtomicInteger> slowEnded = new ConcurrentHashMap<>();
    static final Map<String, Boolean> slowOnce = new ConcurrentHashMap<>();
    static final Map<String, AtomicInteger> refused = new ConcurrentHashMap<>();

    static int count(Map<String, AtomicInteger> counts, String key) {
      AtomicInteger n = counts.get(key);
      return n == null ? 0 : n.get();
    }

    static int bump(Map<String, AtomicInteger> counts, String key) {
      return counts.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
    }

    @PostMapping("/probeK/edge")
    @IdempotentEndpoint
    public ResponseEntity<StreamingResponseBody> edge(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      return ResponseEntity.status(201)
          .body(
              out -> {
                AtomicInteger fail = failing.get(key);
                if (fail != null && fail.getAndDecrement() > 0) {
                  bump(refused, key);
                  throw new IllegalStateException("the provider refused; nothing sent");
                }
                int n = bump(sends, key);
                out.write(("{\"send\":" + n + "}").getBytes(StandardCharsets.UTF_8));
              });
    }
  }
}
