package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.net.URI;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.springframework.context.annotation.Configuration;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.context.request.NativeWebRequest;
import org.springframework.web.context.request.async.CallableProcessingInterceptor;
import org.springframework.web.context.request.async.DeferredResult;
import org.springframework.web.context.request.async.DeferredResultProcessingInterceptor;
import org.springframework.web.context.request.async.WebAsyncManager;
import org.springframework.web.context.request.async.WebAsyncUtils;
import org.springframework.web.servlet.HandlerInterceptor;
import org.springframework.web.servlet.config.annotation.AsyncSupportConfigurer;
import org.springframework.web.servlet.config.annotation.InterceptorRegistry;
import org.springframework.web.servlet.config.annotation.WebMvcConfigurer;

/**
 * An application's own async timeout fallback on an {@link IdempotentEndpoint} (issue 37): its
 * {@code HandlerInterceptor} registers, per request, a {@code CallableProcessingInterceptor} /
 * {@code DeferredResultProcessingInterceptor} on the request's {@code WebAsyncManager} whose {@code
 * handleTimeout} answers a fallback ({@code 503} retry later, or {@code 202} accepted). Spring
 * MVC's chain of these interceptors stops at the first answer, and the application's runs before
 * the starter's {@code preHandle}, so it comes first. The container async timeout (1 s) is shorter
 * than the provider call, which ends once the client has the timeout's answer ({@link
 * FirstAnswer}). SPEC 1, 13, 16: the fallback goes to the client, never stored; the key stays
 * claimed while the send runs (the client's retry gets 409, then the replay of the send's result):
 * one provider send per key; a send that fails after the fallback is released.
 *
 * <p>The fallback is only registered for requests carrying {@link #FALLBACK} (or, globally through
 * {@code WebMvcConfigurer.configureAsyncSupport}, {@link #GLOBAL_FALLBACK}), so the shared
 * application of {@link AsyncTimeoutApplicationTest} behaves as before for the other tests.
 */
@AsyncTimeoutApplicationTest
class AsyncTimeoutFallbackTest extends RunningApplication {

  static final String FALLBACK = "X-Test-Timeout-Fallback";
  static final String GLOBAL_FALLBACK = "X-Test-Global-Timeout-Fallback";
  static final String HOLD_RESULT = "X-Test-Hold-Result";

  /**
   * The application's {@code HandlerInterceptor} registers the fallback per request; it runs before
   * the starter's interceptor, so its timeout handling comes first in Spring MVC's chain. {@code
   * status} is the fallback's status: 503 (retry later) or 202 (accepted).
   */
  @ParameterizedTest
  @CsvSource({
    "callable, 503",
    "future, 503",
    "deferred, 503",
    "callable, 202",
    "future, 202",
    "deferred, 202"
  })
  void aPerRequestTimeoutFallbackOfTheApplicationKeepsTheKeyClaimedWhileTheSendRuns(
      String kind, String status) throws Exception {
    sendsOnceAndReplaysTheResult(this, kind, FALLBACK, status);
  }

  /**
   * The same fallback registered globally ({@code configureAsyncSupport}): Spring MVC's adapter
   * registers it after the starter's interceptor, so the starter's timeout answer (409) comes
   * first.
   */
  @org.junit.jupiter.api.Test
  void aGlobalTimeoutFallbackOfTheApplicationKeepsTheKeyClaimedWhileTheSendRuns() throws Exception {
    sendsOnceAndReplaysTheResult(this, "future", GLOBAL_FALLBACK, "503");
  }

  /**
   * A {@code Callable}'s result that comes just before the timeout, while Spring MVC has not yet
   * dispatched it: the application's per-request interceptor holds it in its {@code postProcess}
   * (which Spring MVC runs after the starter's) until its fallback (503) has answered the timeout,
   * so the fallback wins the race for the request's answer. The send happened: its result is
   * stored, never released, and the retry replays it.
   */
  @org.junit.jupiter.api.Test
  void aResultThatRacesTheTimeoutIsStoredWhenTheFallbackAnswers() throws Exception {
    String key = EndpointClient.newKey();
    String path = "/fallback-test/fallback/quick";
    int sendsBefore = FallbackController.sends.get();

    HttpResponse<byte[]> first = post(path, key, "{}", FALLBACK, "503", HOLD_RESULT, "true");
    HttpResponse<byte[]> retry;
    long deadline = System.nanoTime() + Duration.ofSeconds(15).toNanos();
    do {
      retry = post(path, key, "{}", FALLBACK, "503");
    } while (retry.statusCode() == 409 && System.nanoTime() < deadline);

    String answers =
        String.format(
            "first %s %s, retry %s %s",
            first.statusCode(),
            EndpointClient.text(first),
            retry.statusCode(),
            EndpointClient.text(retry));
    assertThat(first.statusCode()).as("the fallback answered (%s)", answers).isEqualTo(503);
    assertThat(FallbackController.sends.get() - sendsBefore)
        .as("provider sends for one key (%s)", answers)
        .isEqualTo(1);
    assertThat(retry.statusCode()).as("the retry replays the send (%s)", answers).isEqualTo(201);
    assertThat(EndpointClient.header(retry, "Idempotent-Replayed")).isEqualTo("true");
  }

  /**
   * The consequence of a stored fallback: the application answers 202 at the timeout, then the
   * provider call fails (once the client has the 202). SPEC 6: a failed send is released, so the
   * client's retry sends again. The retry must run the handler again, not replay the fallback of a
   * send that never happened.
   */
  @org.junit.jupiter.api.Test
  void aFailedSendBehindAPerRequestFallbackIsReleasedForTheRetry() throws Exception {
    failedSendIsReleasedForTheRetry(this, FALLBACK);
  }

  /**
   * One request whose provider call fails after the container timeout, {@code header} set to 202
   * (or null for no fallback), then, once the work failed, a retry: it must run the handler again.
   */
  static void failedSendIsReleasedForTheRetry(EndpointClient client, String header)
      throws Exception {
    String key = EndpointClient.newKey();
    String path = "/fallback-test/fallback/failing";
    String[] headers = header == null ? new String[0] : new String[] {header, "202"};
    int attemptsBefore = FallbackController.attempts.get();
    int runsBefore = FallbackController.runs.get();

    HttpResponse<byte[]> timedOut =
        FallbackController.FIRST_ANSWER.untilAnswered(() -> client.post(path, key, "{}", headers));
    awaitNoPendingSend();
    // the release follows the failure: a retry meanwhile gets 409 without running the handler
    // (bounded, 15 s) until one runs the handler again
    HttpResponse<byte[]> retry;
    long deadline = System.nanoTime() + Duration.ofSeconds(15).toNanos();
    do {
      retry = client.post(path, key, "{}", headers);
    } while (retry.statusCode() == 409
        && FallbackController.runs.get() == runsBefore + 1
        && System.nanoTime() < deadline);
    awaitNoPendingSend();

    assertThat(FallbackController.runs.get() - runsBefore)
        .as(
            "handler runs for one key whose first send failed: the retry runs it again (first %s"
                + " %s, retry %s %s %s)",
            timedOut.statusCode(),
            EndpointClient.text(timedOut),
            retry.statusCode(),
            EndpointClient.header(retry, "Idempotent-Replayed"),
            EndpointClient.text(retry))
        .isEqualTo(2);
    assertThat(FallbackController.attempts.get() - attemptsBefore)
        .as("provider attempts")
        .isEqualTo(2);
  }

  /**
   * One request of {@code kind} with the fallback {@code header}, its retries while they get 409,
   * and one after the send ended: one provider send, and the late retry replays the handler's 201.
   */
  static void sendsOnceAndReplaysTheResult(
      EndpointClient client, String kind, String header, String status) throws Exception {
    String key = EndpointClient.newKey();
    String path = "/fallback-test/fallback/" + kind;
    int sendsBefore = FallbackController.sends.get();

    HttpResponse<byte[]> timedOut =
        FallbackController.FIRST_ANSWER.untilAnswered(
            () -> client.post(path, key, "{}", header, status));
    HttpResponse<byte[]> retry;
    long deadline = System.nanoTime() + Duration.ofSeconds(15).toNanos();
    do {
      retry = client.post(path, key, "{}", header, status);
    } while (retry.statusCode() == 409 && System.nanoTime() < deadline);
    awaitNoPendingSend();
    HttpResponse<byte[]> late = client.post(path, key, "{}", header, status);
    awaitNoPendingSend();

    String answers =
        String.format(
            "first %s %s, retry %s %s, late %s %s",
            timedOut.statusCode(),
            EndpointClient.text(timedOut),
            retry.statusCode(),
            EndpointClient.text(retry),
            late.statusCode(),
            EndpointClient.text(late));
    assertThat(FallbackController.sends.get() - sendsBefore)
        .as("provider sends for one key (%s)", answers)
        .isEqualTo(1);
    assertThat(late.statusCode())
        .as("a retry after the send ended replays its result (%s)", answers)
        .isEqualTo(201);
    assertThat(EndpointClient.header(late, "Idempotent-Replayed")).isEqualTo("true");
  }

  /** Every provider call begun has ended (bounded, 10 s). */
  static void awaitNoPendingSend() throws InterruptedException {
    long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
    while (FallbackController.pending.get() > 0 && System.nanoTime() < deadline) {
      Thread.sleep(20);
    }
  }

  /** The application's interceptor, registered through its own {@code WebMvcConfigurer}. */
  @Configuration(proxyBeanMethods = false)
  static class FallbackConfiguration implements WebMvcConfigurer {
    @Override
    public void addInterceptors(InterceptorRegistry registry) {
      registry.addInterceptor(new FallbackInterceptor());
    }

    @Override
    public void configureAsyncSupport(AsyncSupportConfigurer configurer) {
      GlobalFallback fallback = new GlobalFallback();
      configurer.registerCallableInterceptors(fallback);
      configurer.registerDeferredResultInterceptors(fallback);
    }
  }

  /** A fallback for the requests carrying {@link #GLOBAL_FALLBACK}, registered globally. */
  static class GlobalFallback
      implements CallableProcessingInterceptor, DeferredResultProcessingInterceptor {
    @Override
    public <T> Object handleTimeout(NativeWebRequest request, Callable<T> task) {
      String status = request.getHeader(GLOBAL_FALLBACK);
      return status == null ? RESULT_NONE : fallback(status);
    }

    @Override
    @SuppressWarnings("unchecked")
    public <T> boolean handleTimeout(NativeWebRequest request, DeferredResult<T> deferredResult) {
      String status = request.getHeader(GLOBAL_FALLBACK);
      if (status == null) {
        return true;
      }
      ((DeferredResult<Object>) deferredResult).setResult(fallback(status));
      return false;
    }
  }

  static ResponseEntity<Map<String, Object>> fallback(String status) {
    return ResponseEntity.status(Integer.parseInt(status)).body(Map.of("retry", "later"));
  }

  /** Registers a timeout fallback on the request's async manager, as an application may. */
  static class FallbackInterceptor implements HandlerInterceptor {
    @Override
    public boolean preHandle(
        HttpServletRequest request, HttpServletResponse response, Object handler) {
      String status = request.getHeader(FALLBACK);
      if (status == null) {
        return true;
      }
      ResponseEntity<Map<String, Object>> fallback = fallback(status);
      boolean holdResult = request.getHeader(HOLD_RESULT) != null;
      CountDownLatch answered = new CountDownLatch(1);
      WebAsyncManager async = WebAsyncUtils.getAsyncManager(request);
      async.registerCallableInterceptor(
          FallbackInterceptor.class.getName(),
          new CallableProcessingInterceptor() {
            @Override
            public <T> Object handleTimeout(NativeWebRequest webRequest, Callable<T> task) {
              return fallback;
            }

            /**
             * The request is over: the fallback was set as its result and answered. Counted down
             * here, not in {@link #handleTimeout}, which runs before Spring MVC sets the fallback
             * (the first result set wins: a held result released there could still come first).
             */
            @Override
            public <T> void afterCompletion(NativeWebRequest webRequest, Callable<T> task) {
              answered.countDown();
            }

            /**
             * With {@link #HOLD_RESULT}: holds the result (this runs after the starter's
             * interceptor saw it: Spring MVC post-processes in reverse order) until this fallback
             * answered the timeout and the request completed (bounded, 10 s; Spring's cancel of the
             * task at the timeout interrupts this thread, which goes on waiting).
             */
            @Override
            public <T> void postProcess(NativeWebRequest webRequest, Callable<T> task, Object r) {
              if (holdResult) {
                awaitUninterruptibly(answered);
              }
            }
          });
      async.registerDeferredResultInterceptor(
          FallbackInterceptor.class.getName(),
          new DeferredResultProcessingInterceptor() {
            @Override
            @SuppressWarnings("unchecked")
            public <T> boolean handleTimeout(
                NativeWebRequest webRequest, DeferredResult<T> deferredResult) {
              ((DeferredResult<Object>) deferredResult).setResult(fallback);
              return false;
            }
          });
      return true;
    }
  }

  /** Waits for {@code latch} (bounded, 10 s) through interrupts, then restores the interrupt. */
  static void awaitUninterruptibly(CountDownLatch latch) {
    boolean interrupted = false;
    long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
    try {
      while (System.nanoTime() < deadline) {
        try {
          if (latch.await(deadline - System.nanoTime(), TimeUnit.NANOSECONDS)) {
            return;
          }
        } catch (InterruptedException e) {
          interrupted = true;
        }
      }
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /**
   * Handlers whose provider call outlives the container's 1 s timeout: it ends once the test's
   * client has the timeout's answer ({@link FirstAnswer#untilAnswered}).
   */
  @RestController
  static class FallbackController {
    static final FirstAnswer FIRST_ANSWER = new FirstAnswer();
    private static final Executor PROVIDER = FIRST_ANSWER.provider();
    static final AtomicInteger sends = new AtomicInteger();
    static final AtomicInteger pending = new AtomicInteger();
    static final AtomicInteger runs = new AtomicInteger();

    static ResponseEntity<Map<String, Object>> sent(String kind, int run) {
      sends.incrementAndGet();
      pending.decrementAndGet();
      String id = kind + "_" + run;
      return ResponseEntity.created(URI.create("/fallback-test/" + id)).body(Map.of("id", id));
    }

    static int begin() {
      pending.incrementAndGet();
      return runs.incrementAndGet();
    }

    @PostMapping("/fallback-test/fallback/callable")
    @IdempotentEndpoint
    public Callable<ResponseEntity<Map<String, Object>>> callable() {
      int run = begin();
      // the work waits for the provider interruptibly; the starter shields it from Spring's cancel
      return () -> CompletableFuture.supplyAsync(() -> sent("callable", run), PROVIDER).get();
    }

    /** A provider call that ends at once, well before the container's timeout. */
    @PostMapping("/fallback-test/fallback/quick")
    @IdempotentEndpoint
    public Callable<ResponseEntity<Map<String, Object>>> quick() {
      int run = begin();
      return () -> sent("quick", run);
    }

    @PostMapping("/fallback-test/fallback/future")
    @IdempotentEndpoint
    public CompletableFuture<ResponseEntity<Map<String, Object>>> future() {
      int run = begin();
      return CompletableFuture.supplyAsync(() -> sent("future", run), PROVIDER);
    }

    static final AtomicInteger attempts = new AtomicInteger();

    /** A provider call that fails (the provider refused the message) after the timeout. */
    @PostMapping("/fallback-test/fallback/failing")
    @IdempotentEndpoint
    public CompletableFuture<ResponseEntity<Map<String, Object>>> failing() {
      begin();
      return CompletableFuture.supplyAsync(
          () -> {
            attempts.incrementAndGet();
            pending.decrementAndGet();
            throw new IllegalStateException("the provider refused the message (test)");
          },
          PROVIDER);
    }

    @PostMapping("/fallback-test/fallback/deferred")
    @IdempotentEndpoint
    public DeferredResult<ResponseEntity<Map<String, Object>>> deferred() {
      int run = begin();
      DeferredResult<ResponseEntity<Map<String, Object>>> result = new DeferredResult<>();
      PROVIDER.execute(() -> result.setResult(sent("deferred", run)));
      return result;
    }
  }
}
