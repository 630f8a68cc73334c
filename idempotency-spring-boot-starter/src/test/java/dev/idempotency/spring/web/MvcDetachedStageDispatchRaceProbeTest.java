package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import jakarta.servlet.AsyncEvent;
import jakarta.servlet.AsyncListener;
import jakarta.servlet.DispatcherType;
import jakarta.servlet.Filter;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletOutputStream;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.WriteListener;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import jakarta.servlet.http.HttpServletResponseWrapper;
import java.io.IOException;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.EnumSet;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.core.Ordered;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.context.request.NativeWebRequest;
import org.springframework.web.context.request.async.DeferredResult;
import org.springframework.web.context.request.async.DeferredResultProcessingInterceptor;
import org.springframework.web.context.request.async.WebAsyncManager;
import org.springframework.web.context.request.async.WebAsyncTask;
import org.springframework.web.context.request.async.WebAsyncUtils;
import org.springframework.web.servlet.AsyncHandlerInterceptor;
import org.springframework.web.servlet.config.annotation.InterceptorRegistry;
import org.springframework.web.servlet.config.annotation.WebMvcConfigurer;
import reactor.core.publisher.Mono;

/**
 * probeV, of fixrace cfa6549d: the window it closed for a {@code Callable}'s outcome (a detached
 * call's result that Spring MVC still dispatches because it came while the container's timeout
 * handling was under way, after the timeout's 409 was written and before {@code
 * AsyncContext.complete()}), tried on the handler's own stage instead: a {@code CompletableFuture}
 * and a {@code DeferredResult} that an application thread completes in that window. {@code
 * AsyncTimeouts.answerDetachedOutcome} looks only at a {@code Callable}'s outcome ({@code
 * postProcess}), so the dispatch of a stage's value is handled by Spring MVC as usual, while the
 * starter took the same value as the detached call's late result. For a final value that is a
 * second rendering of one answer; for more async work (a {@code Callable} the stage completes with)
 * Spring MVC and the starter may each run it: two sends.
 *
 * <p>The window is held open as in {@link MvcDetachedResultDispatchRaceProbeTest}: a filter's
 * response wrapper opens the handler's gate once the timeout's 409 is written, and holds the
 * timeout's thread until Spring MVC has taken an async result (20 s at most). One application on a
 * real Redis, {@code spring.mvc.async.request-timeout=1s}; real HTTP.
 */
class MvcDetachedStageDispatchRaceProbeTest extends MvcProbeApplication {

  private static final String BASE = "/probeV/stage-race/";

  MvcDetachedStageDispatchRaceProbeTest() {
    super(
        RaceApplication.class,
        "spring.mvc.async.request-timeout=1s",
        "idempotency.close-grace-period=10s");
  }

  @Override
  public int runs() {
    return Race.entered.get();
  }

  /**
   * The first request times out (409), its stage completes in the window, the retry gets the work's
   * one answer replayed, and the provider was called once. Holds on Boot 3.5 and 4.0 (probeV, at
   * 98c59631): a {@code DeferredResult}'s final value is dispatched by Spring MVC ({@code
   * dispatched}) and rendered to the finished response only, the stored answer the starter's; a
   * {@code CompletableFuture}'s value (or {@code Callable}) is not taken by Spring MVC at all once
   * the timeout is handled ({@code not taken}: its adapter's result is not set), so the starter
   * alone follows it.
   */
  @ParameterizedTest
  @Tag("extended") // about 7 s a row: docs/guarantees.md
  @ValueSource(strings = {"future-value", "deferred-value", "future-callable"})
  void aStageCompletedWhileTheTimeoutIsHandledSendsOnce(String shape) throws Exception {
    String seen = raced(shape);
    assertThat(seen)
        .as(seen)
        .contains("the window: " + (shape.startsWith("deferred") ? "dispatched" : "not taken"));
    assertThat(seen).as(seen).contains("sends: 1,");
  }

  /**
   * An application's own {@code DeferredResult} whose value is more async work (a {@code Callable},
   * a {@code WebAsyncTask}, a lazy {@code Mono}: each the send), set by an application thread while
   * the container's timeout is handled, after the starter's first timeout handler detached the
   * call: held open by the filter (after the 409 is written, before {@code
   * AsyncContext.complete()}), or, on the {@code by-interceptor} path, by an application's {@code
   * DeferredResultProcessingInterceptor} registered per request ahead of the starter's, whose
   * {@code handleTimeout} takes its time (no hold in the starter's own code). Expected: one send,
   * the retry gets it replayed. Holds since fixown: the async dispatch of such work, which the
   * detached call runs itself, is answered 409 ({@code AsyncDispatches.answerDetachedOutcome},
   * {@code AsyncWork.followsDetached}).
   *
   * <p>Was an open finding (probeV, at 98c59631; second send, SPEC 1), every row on Boot 3.5 and
   * 4.0 (the {@code Callable} row in six runs per line, the others in four): "first answer 409,
   * last 201 replayed=true sent-..., the window: dispatched, sends: 2, async dispatches: 2". The
   * advisor's result handler on the application's {@code DeferredResult} sets Spring MVC's copy
   * (not expired until the timeout's handling completes, so Spring MVC takes the value and
   * dispatches it) and reports the value to the detached call ({@code AsyncWork.lateResult}), which
   * runs the work itself ({@code continuedDetached}); on the async dispatch {@code
   * AsyncTimeouts.answerDetachedOutcome} looks only at a {@code Callable}'s outcome ({@code
   * callableOutcome}, from {@code postProcess}), and {@code outcomeReplaced} sees the dispatched
   * value is the {@code DeferredResult}'s own, so Spring MVC handles it too: it runs the work again
   * on its executor (the second dispatch is then the {@code Callable}'s outcome, answered 409 by
   * {@code answerDetachedOutcome}). fixrace cfa6549d closed this window for a {@code Callable}'s
   * outcome only. A {@code CompletableFuture}'s value is not taken by Spring MVC in the same window
   * (the rows above), so this is the {@code DeferredResult}'s alone.
   */
  @ParameterizedTest
  @Tag("extended") // about 2 s a row: docs/guarantees.md
  @ValueSource(
      strings = {
        "deferred-callable",
        "deferred-task",
        "deferred-mono",
        "by-interceptor/deferred-callable"
      })
  void aDeferredResultsAsyncWorkSetWhileTheTimeoutIsHandledSendsOnce(String shape)
      throws Exception {
    String seen = raced(shape);
    assertThat(seen).as(seen).contains("the window: dispatched");
    assertThat(seen).as("a second send: " + seen).contains("sends: 1,");
  }

  /**
   * An application's own {@code DeferredResult} set by an application thread after the starter
   * called {@code AsyncContext.complete()} for the timeout's 409 and before the request's
   * completion expired Spring MVC's copy: held open by an application's {@code AsyncListener}
   * (added to the request's async context as it goes async), whose {@code onTimeout} runs after
   * Spring MVC's and waits (20 s at most) until the application's {@code setResult} returned.
   * Expected: one send, the retry gets it replayed, and the application's {@code setResult} does
   * not throw. Holds since fixown: the advisor's result handler, for a detached call, does not pass
   * on the container's refusal of the copy's dispatch; the call follows the value.
   *
   * <p>Was an open finding (probeV, at 98c59631; other: no second or lost send), both rows on Boot
   * 3.5 and 4.0, two runs each: "first answer 409, last 201 replayed=true sent-..., the window:
   * threw java.lang.IllegalStateException: Calling [asyncDispatch()] is not valid for a request
   * with Async state [COMPLETING], sends: 1, async dispatches: 0". The send and its replay hold
   * (the advisor reports the value to the call in a {@code finally}), but the application's own
   * {@code setResult}, which Spring MVC's {@code DeferredResult} answers with {@code true} or
   * {@code false}, throws after its value was taken and stored: {@code
   * IdempotentEndpointAdvisor.observed} sets Spring MVC's copy, not yet expired, whose dispatch
   * Tomcat refuses since the starter completed the request itself ({@code
   * AsyncTimeouts.answer409}), unknown to Spring MVC's {@code StandardServletAsyncWebRequest}. An
   * application that takes that throw for a failed delivery (and sends again, or alerts) is misled.
   */
  @ParameterizedTest
  @Tag("extended") // about 7 s a row: docs/guarantees.md
  @ValueSource(strings = {"after-complete/deferred-value", "after-complete/deferred-callable"})
  void aDeferredResultSetAfterTheTimeoutsCompleteSendsOnce(String shape) throws Exception {
    String seen = raced(shape);
    assertThat(seen).as(seen).contains("sends: 1,");
    assertThat(seen)
        .as("the application's setResult: " + seen)
        .containsPattern("the window: set (true|false),");
  }

  /**
   * Runs the race on {@code shape}'s endpoint: the first request must time out (409) and the retry
   * get the send's answer replayed; returns what was seen (the window, the sends, the answers).
   */
  private String raced(String shape) throws Exception {
    String path = BASE + shape;
    String key = EndpointClient.newKey();
    CountDownLatch gate = new CountDownLatch(1);
    Race.gates.put(key, gate);
    HttpResponse<byte[]> first;
    try {
      first = post(path, key, "{}");
    } finally {
      gate.countDown();
    }
    HttpResponse<byte[]> last = MvcProbes.retryUntilAnswered(this, path, key);
    // a second run by Spring MVC's dispatch, if any, comes on the async dispatch that the window
    // staged: given its time (bounded) before the count is read
    waitFor(() -> Race.sends(key) > 1, Duration.ofSeconds(5));
    String seen =
        "first answer "
            + MvcProbes.replayed(first)
            + ", last "
            + MvcProbes.replayed(last)
            + ", the window: "
            + HoldsTheTimeoutAnswer.staged.get(key)
            + ", sends: "
            + Race.sends(key)
            + ", async dispatches: "
            + HoldsTheTimeoutAnswer.asyncDispatches.getOrDefault(key, new AtomicInteger()).get();
    assertThat(first.statusCode()).as(seen).isEqualTo(409);
    assertThat(last.statusCode()).as("the retry: " + seen).isEqualTo(201);
    assertThat(EndpointClient.text(last)).as("the retry: " + seen).isEqualTo("sent-" + key);
    return seen;
  }

  private static boolean waitFor(BooleanSupplier condition, Duration within) {
    long deadline = System.nanoTime() + within.toNanos();
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        return false;
      }
      try {
        Thread.sleep(5);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return false;
      }
    }
    return true;
  }

  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import({Race.class, MoreWork.class})
  static class RaceApplication implements WebMvcConfigurer {
    /**
     * Registers {@link SlowTimeoutInterceptor} per request, in a handler interceptor of the
     * application's, ahead of the starter's own (AsyncTimeouts: "an application's timeout fallback
     * registered ahead of this interceptor").
     */
    @Override
    public void addInterceptors(InterceptorRegistry registry) {
      registry.addInterceptor(
          new AsyncHandlerInterceptor() {
            @Override
            public boolean preHandle(
                HttpServletRequest request, HttpServletResponse response, Object handler) {
              if (request.getDispatcherType() == DispatcherType.REQUEST) {
                WebAsyncUtils.getAsyncManager(request)
                    .registerDeferredResultInterceptor(
                        SlowTimeoutInterceptor.class.getName(), new SlowTimeoutInterceptor());
              }
              return true;
            }

            @Override
            public void afterConcurrentHandlingStarted(
                HttpServletRequest request, HttpServletResponse response, Object handler) {
              String key = request.getHeader("Idempotency-Key");
              if (key != null
                  && request.getRequestURI().startsWith(BASE + "after-complete/")
                  && request.isAsyncStarted()) {
                request.getAsyncContext().addListener(new AfterTheTimeout(key));
              }
            }
          });
    }

    @Bean
    FilterRegistrationBean<HoldsTheTimeoutAnswer> holdsTheTimeoutAnswer() {
      FilterRegistrationBean<HoldsTheTimeoutAnswer> registration =
          new FilterRegistrationBean<>(new HoldsTheTimeoutAnswer());
      registration.setOrder(Ordered.HIGHEST_PRECEDENCE);
      registration.setDispatcherTypes(EnumSet.of(DispatcherType.REQUEST, DispatcherType.ASYNC));
      return registration;
    }
  }

  /** Endpoints whose own stage an application thread completes once the key's gate opens. */
  @RestController
  static class Race {
    static final AtomicInteger entered = new AtomicInteger();
    static final Map<String, CountDownLatch> gates = new ConcurrentHashMap<>();
    static final Map<String, AtomicInteger> sent = new ConcurrentHashMap<>();

    /**
     * The keys whose returned future completed and ran what depends on it: registered first, so (a
     * CompletableFuture runs its dependents last registered first) run after Spring MVC's copy and
     * the starter's follower.
     */
    static final Map<String, Boolean> completed = new ConcurrentHashMap<>();

    private static <T> CompletableFuture<T> marked(String key, CompletableFuture<T> future) {
      future.whenComplete((value, failure) -> completed.put(key, true));
      return future;
    }

    private static final ExecutorService APPLICATION = Executors.newCachedThreadPool();

    static int sends(String key) {
      AtomicInteger count = sent.get(key);
      return count == null ? 0 : count.get();
    }

    /** The provider's send: counted per key. */
    static org.springframework.http.ResponseEntity<String> send(String key) {
      sent.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
      return org.springframework.http.ResponseEntity.status(201).body("sent-" + key);
    }

    /**
     * What the application's {@code setResult} returned, or the class of what it threw, per key.
     */
    static final Map<String, String> setOutcomes = new ConcurrentHashMap<>();

    private static void setAndRecord(String key, BooleanSupplier setResult) {
      try {
        setOutcomes.put(key, "set " + setResult.getAsBoolean());
      } catch (RuntimeException e) {
        setOutcomes.put(key, "threw " + e.getClass().getName() + ": " + e.getMessage());
      }
    }

    static void awaitGate(String key) {
      CountDownLatch gate = gates.getOrDefault(key, new CountDownLatch(0));
      try {
        gate.await(30, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }

    @PostMapping(BASE + "future-value")
    @IdempotentEndpoint
    public CompletableFuture<org.springframework.http.ResponseEntity<String>> futureValue(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      return marked(
          key,
          CompletableFuture.supplyAsync(
              () -> {
                awaitGate(key);
                return send(key);
              },
              APPLICATION));
    }

    @PostMapping({BASE + "deferred-value", BASE + "after-complete/deferred-value"})
    @IdempotentEndpoint
    public DeferredResult<org.springframework.http.ResponseEntity<String>> deferredValue(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      DeferredResult<org.springframework.http.ResponseEntity<String>> result =
          new DeferredResult<>();
      APPLICATION.execute(
          () -> {
            awaitGate(key);
            setAndRecord(key, () -> result.setResult(send(key)));
          });
      return result;
    }

    @PostMapping(BASE + "future-callable")
    @IdempotentEndpoint
    public CompletableFuture<Callable<org.springframework.http.ResponseEntity<String>>>
        futureCallable(@RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      return marked(
          key,
          CompletableFuture.supplyAsync(
              () -> {
                awaitGate(key);
                return () -> send(key);
              },
              APPLICATION));
    }

    @PostMapping({
      BASE + "deferred-callable",
      BASE + "by-interceptor/deferred-callable",
      BASE + "after-complete/deferred-callable"
    })
    @IdempotentEndpoint
    public DeferredResult<Callable<org.springframework.http.ResponseEntity<String>>>
        deferredCallable(@RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      DeferredResult<Callable<org.springframework.http.ResponseEntity<String>>> result =
          new DeferredResult<>();
      APPLICATION.execute(
          () -> {
            awaitGate(key);
            setAndRecord(key, () -> result.setResult(() -> send(key)));
          });
      return result;
    }
  }

  /** The {@code DeferredResult} of a {@code WebAsyncTask} or a lazy {@code Mono}: the send. */
  @RestController
  static class MoreWork {
    private static final ExecutorService APPLICATION = Executors.newCachedThreadPool();

    @PostMapping(BASE + "deferred-task")
    @IdempotentEndpoint
    public DeferredResult<WebAsyncTask<org.springframework.http.ResponseEntity<String>>>
        deferredTask(@RequestHeader("Idempotency-Key") String key) {
      Race.entered.incrementAndGet();
      DeferredResult<WebAsyncTask<org.springframework.http.ResponseEntity<String>>> result =
          new DeferredResult<>();
      APPLICATION.execute(
          () -> {
            Race.awaitGate(key);
            result.setResult(new WebAsyncTask<>(() -> Race.send(key)));
          });
      return result;
    }

    @PostMapping(BASE + "deferred-mono")
    @IdempotentEndpoint
    public DeferredResult<Mono<org.springframework.http.ResponseEntity<String>>> deferredMono(
        @RequestHeader("Idempotency-Key") String key) {
      Race.entered.incrementAndGet();
      DeferredResult<Mono<org.springframework.http.ResponseEntity<String>>> result =
          new DeferredResult<>();
      APPLICATION.execute(
          () -> {
            Race.awaitGate(key);
            result.setResult(Mono.fromCallable(() -> Race.send(key)));
          });
      return result;
    }
  }

  /**
   * An application's async interceptor that takes its time at a timeout (a metric, a log line), for
   * the {@code by-interceptor} paths: it runs after the starter's first timeout handler decided the
   * call detached and before the starter's own interceptor writes the 409. It opens the key's gate
   * and waits (20 s at most) until the result it is told of is set: the application's thread set it
   * meanwhile.
   */
  static final class SlowTimeoutInterceptor implements DeferredResultProcessingInterceptor {
    @Override
    public <T> boolean handleTimeout(NativeWebRequest request, DeferredResult<T> deferredResult) {
      HttpServletRequest http = request.getNativeRequest(HttpServletRequest.class);
      String key = http == null ? null : http.getHeader("Idempotency-Key");
      if (key == null || !http.getRequestURI().startsWith(BASE + "by-interceptor/")) {
        return true;
      }
      CountDownLatch gate = Race.gates.get(key);
      if (gate != null) {
        gate.countDown();
      }
      boolean set = waitFor(deferredResult::hasResult, Duration.ofSeconds(20));
      HoldsTheTimeoutAnswer.staged.put(key, set ? "dispatched" : "no result");
      return true;
    }
  }

  /**
   * An application's listener of the request's async events, added as the request goes async, so
   * after Spring MVC's: at the timeout it opens the key's gate and waits (20 s at most) until the
   * application's {@code setResult} returned, after the starter's 409 and {@code complete()}, and
   * before the request's completion expires Spring MVC's copy. What it saw: the application's
   * {@code setResult} outcome.
   */
  static final class AfterTheTimeout implements AsyncListener {
    private final String key;

    AfterTheTimeout(String key) {
      this.key = key;
    }

    @Override
    public void onTimeout(AsyncEvent event) {
      CountDownLatch gate = Race.gates.get(key);
      if (gate != null) {
        gate.countDown();
      }
      waitFor(() -> Race.setOutcomes.containsKey(key), Duration.ofSeconds(20));
      HoldsTheTimeoutAnswer.staged.put(key, String.valueOf(Race.setOutcomes.get(key)));
    }

    @Override
    public void onComplete(AsyncEvent event) {}

    @Override
    public void onError(AsyncEvent event) {}

    @Override
    public void onStartAsync(AsyncEvent event) {}
  }

  /**
   * Holds the window open, for the probe's paths only: once the timeout's 409 is written (while the
   * request is async) it opens the key's gate, as the client that got the 409 may set the work
   * going, and holds the timeout's thread (20 s at most) until Spring MVC has taken an async
   * result. What it saw, per key: {@code dispatched}, or {@code no result} if the wait ran out; and
   * how many async dispatches the key's request had.
   */
  static final class HoldsTheTimeoutAnswer implements Filter {
    static final Map<String, String> staged = new ConcurrentHashMap<>();
    static final Map<String, AtomicInteger> asyncDispatches = new ConcurrentHashMap<>();

    @Override
    public void doFilter(ServletRequest request, ServletResponse response, FilterChain chain)
        throws IOException, ServletException {
      HttpServletRequest http = (HttpServletRequest) request;
      String key = http.getHeader("Idempotency-Key");
      if (!http.getRequestURI().startsWith(BASE) || key == null) {
        chain.doFilter(request, response);
        return;
      }
      if (http.getRequestURI().startsWith(BASE + "by-interceptor/")
          || http.getRequestURI().startsWith(BASE + "after-complete/")) {
        if (http.getDispatcherType() == DispatcherType.ASYNC) {
          asyncDispatches.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
        }
        chain.doFilter(request, response);
        return;
      }
      if (http.getDispatcherType() == DispatcherType.ASYNC) {
        asyncDispatches.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
        chain.doFilter(request, response);
        return;
      }
      chain.doFilter(request, new SendsTheTimeoutAnswer(http, (HttpServletResponse) response, key));
    }

    private static final class SendsTheTimeoutAnswer extends HttpServletResponseWrapper {
      private final HttpServletRequest request;
      private final String key;

      SendsTheTimeoutAnswer(HttpServletRequest request, HttpServletResponse response, String key) {
        super(response);
        this.request = request;
        this.key = key;
      }

      @Override
      public ServletOutputStream getOutputStream() throws IOException {
        ServletOutputStream delegate = super.getOutputStream();
        return new ServletOutputStream() {
          @Override
          public boolean isReady() {
            return delegate.isReady();
          }

          @Override
          public void setWriteListener(WriteListener listener) {
            delegate.setWriteListener(listener);
          }

          @Override
          public void write(int b) throws IOException {
            delegate.write(b);
          }

          @Override
          public void write(byte[] b, int off, int len) throws IOException {
            delegate.write(b, off, len);
            written();
          }
        };
      }

      /** The timeout's 409 was written: the gate opens, then the timeout's thread is held. */
      private void written() {
        if (getStatus() != 409 || !request.isAsyncStarted() || staged.containsKey(key)) {
          return;
        }
        CountDownLatch gate = Race.gates.get(key);
        if (gate != null) {
          gate.countDown();
        }
        WebAsyncManager manager = WebAsyncUtils.getAsyncManager(request);
        // a future's value that Spring MVC does not take marks its key completed instead
        waitFor(
            () -> manager.hasConcurrentResult() || Race.completed.containsKey(key),
            Duration.ofSeconds(20));
        synchronized (manager) {
          // Spring MVC dispatches in the same block that set the result: done by now
        }
        staged.put(
            key,
            manager.hasConcurrentResult()
                ? "dispatched"
                : Race.completed.containsKey(key) ? "not taken" : "no result");
      }
    }
  }
}
