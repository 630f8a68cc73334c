package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.core.task.SimpleAsyncTaskExecutor;
import org.springframework.http.HttpStatus;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.ResponseStatus;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.context.request.NativeWebRequest;
import org.springframework.web.context.request.RequestAttributes;
import org.springframework.web.context.request.RequestContextHolder;
import org.springframework.web.context.request.async.CallableProcessingInterceptor;
import org.springframework.web.context.request.async.DeferredResult;
import org.springframework.web.context.request.async.DeferredResultProcessingInterceptor;
import org.springframework.web.context.request.async.WebAsyncTask;
import org.springframework.web.context.request.async.WebAsyncUtils;
import org.springframework.web.filter.OncePerRequestFilter;
import org.springframework.web.servlet.mvc.method.annotation.SseEmitter;
import org.springframework.web.servlet.mvc.method.annotation.StreamingResponseBody;

/**
 * probeB, of ontime (b8d5039c) and ontime2 (83229d0b), {@link AsyncTimeouts#outcomeReplaced}: an
 * application's async processing interceptor (registered by a filter, ahead of the starter's, as
 * Spring Security's is) that replaces the work's outcome, on a key's first request only, in shapes
 * the merges' own probe ({@link MvcThrowingCallableInterceptorProbeTest}) does not cover: the
 * work's own outcome is null, an exception returned as a value, a 5xx (which must release the key),
 * a completed {@code CompletableFuture} or one still running (more async work whose send happened
 * or is under way), a {@code WebAsyncTask} on its own executor; two interceptors that fail; one
 * that fails in {@code afterCompletion}; one that fails in, or answers, {@code handleTimeout} while
 * the work goes on. SPEC 1: the work sends at most once per key while its answer is kept, a retry
 * gets what the work really produced, and a 5xx the work produced releases the key. One application
 * on a real Redis, Spring MVC's async timeout 1 s.
 */
class MvcReplacedOutcomeShapesProbeTest extends MvcProbeApplication {

  MvcReplacedOutcomeShapesProbeTest() {
    super(
        ShapesApplication.class,
        "spring.mvc.async.request-timeout=1s",
        "spring.task.execution.pool.core-size=2",
        "spring.task.execution.pool.max-size=2");
  }

  @Override
  public int runs() {
    return Shapes.entered.get();
  }

  /**
   * A {@code Callable}'s work whose outcome a {@code CallableProcessingInterceptor}'s {@code
   * postProcess} failure replaces on time (or that fails after it, in {@code afterCompletion}): the
   * retry gets the work's own outcome, replayed (null: a 201 with no body; an exception returned as
   * a value: Spring MVC throws it, the controller maps it to a kept 422; a 502: the key released,
   * so the retry runs the work again and gets its own 502).
   */
  @ParameterizedTest(name = "{0}")
  @CsvSource({
    "null,1,201,''",
    "exception-value,1,422,refused-1",
    "bad-gateway,2,502,failed-2",
    "own-executor,1,201,sent-1",
    "post-twice,1,201,sent-1",
    "after-completion,1,201,sent-1"
  })
  void aCallablesOutcomeReplacedOnTimeIsTheWorksOwn(
      String mode, int sends, int replayed, String replayedBody) throws Exception {
    sendsAsTheWorkDid("/shapes/callable/", mode, false, sends, replayed, replayedBody);
  }

  /**
   * The work's outcome is more async work, a {@code CompletableFuture}, whose send happened (a
   * completed stage: {@code later-completed}) or is under way ({@code later-stage}), when the
   * interceptor's {@code postProcess} failure replaces it on time: a {@code Callable}'s ({@code
   * CallableProcessingInterceptor}), and a {@code CompletableFuture} handler's stage ({@code
   * /shapes/stage/...}, a {@code DeferredResultProcessingInterceptor}). Spring MVC dispatches the
   * failure in place of the stage and never follows the stage; the starter follows it to its end
   * ({@link AsyncTimeouts#outcomeReplaced}, {@code AsyncWork#followReplacedOutcome}) and records
   * its outcome: the retry gets the stage's 201 "sent-1" replayed; a stage that failed with the
   * refusal ({@code later-refused}) goes through the application's exception handler, a kept 422; a
   * stage's 502 ({@code later-bad-gateway}) releases the key, so the retry runs the work again and
   * gets its own 502. The client of the first request gets Spring MVC's 500 for the interceptor's
   * failure. Was an open finding (probeB, on ad1148aa: on Boot 3.5 and 4.0 the first three rows
   * answered the first 500, the retry 201 "sent-2", 2 sends: the stage was dropped and the 500
   * released the key).
   */
  @ParameterizedTest(name = "{0}{1}")
  @CsvSource({
    "/shapes/callable/,later-completed,1,201,sent-1",
    "/shapes/callable/,later-stage,1,201,sent-1",
    "/shapes/stage/,later-completed,1,201,sent-1",
    "/shapes/callable/,later-refused,1,422,refused-1",
    "/shapes/stage/,later-refused,1,422,refused-1",
    "/shapes/callable/,later-bad-gateway,2,502,failed-2"
  })
  void aLaterStageReplacedOnTimeIsFollowedToItsEnd(
      String prefix, String mode, int sends, int replayed, String replayedBody) throws Exception {
    sendsAsTheWorkDid(prefix, mode, false, sends, replayed, replayedBody);
  }

  /**
   * A {@code Callable}'s or a {@code CompletableFuture}'s work that times out (1 s) while it runs,
   * an application interceptor failing in its {@code handleTimeout} ({@code timeout-throws}) or
   * answering the timeout with a value of its own ({@code timeout-value}: a 504 for a {@code
   * Callable}; {@code timeout-answers}: a 504 set on the {@code DeferredResult}, the chain
   * stopped). The work goes on and sends once; the client gets the application's answer, never
   * stored, and the retry the work's 201 "sent-1", replayed. Passes on Boot 3.5 and 4.0 (the
   * starter's own timeout handler runs ahead of the interceptors and detaches the call). {@code
   * extended}: about 2 s a row.
   */
  @Tag("extended")
  @ParameterizedTest(name = "{0}{1}")
  @CsvSource({
    "/shapes/callable/,timeout-throws",
    "/shapes/callable/,timeout-value",
    "/shapes/stage/,timeout-throws",
    "/shapes/stage/,timeout-answers"
  })
  void anInterceptorsTimeoutAnswerNeverMakesASecondSend(String prefix, String mode)
      throws Exception {
    sendsAsTheWorkDid(prefix, mode, true, 1, 201, "sent-1");
  }

  /**
   * probeC, of fixreplaced: shapes of more async work the fix's own rows do not reach, the outcome
   * of a {@code Callable} whose interceptor's {@code postProcess} fails on the key's first request:
   * a {@code DeferredResult} an application thread sets later with the send's 201 ({@code
   * later-deferred}); a later {@code Callable} or {@code WebAsyncTask} (run without the request's
   * interceptors) that sends, then reads the request's attributes after it sent ({@code
   * later-callable-reads}, {@code later-task-reads}). The retry must get the send's 201 "sent-1"
   * replayed, with one send.
   */
  @ParameterizedTest(name = "{0}")
  @CsvSource({"later-deferred", "later-callable-reads", "later-task-reads"})
  void aLaterShapeReplacedOnTimeIsFollowedToItsEnd(String mode) throws Exception {
    sendsAsTheWorkDid("/shapes/later/", mode, false, 1, 201, "sent-1");
  }

  /**
   * probeC, of fixreplaced: the replaced outcome is a stream ({@code StreamingResponseBody}) or an
   * emitter ({@code SseEmitter}) whose work sends after the interceptor's failure was dispatched:
   * whatever the retry gets, the provider must have sent once (a release after the send would make
   * the retry send a second time).
   */
  @ParameterizedTest(name = "{0}")
  @CsvSource({"later-stream", "later-emitter"})
  void aLaterStreamReplacedOnTimeSendsOnce(String mode) throws Exception {
    String key = EndpointClient.newKey();
    String path = "/shapes/later/" + mode;
    HttpResponse<byte[]> first =
        Shapes.HELD.firstAnswer(
            port(),
            "/shapes-block",
            false,
            false,
            () -> post(path, key, "{}"),
            () -> Shapes.sendsOf(key) >= 1 && Shapes.failedOn.containsKey(key));
    HttpResponse<byte[]> retry = MvcProbes.retryUntilAnswered(this, path, key);
    String facts =
        "first: "
            + MvcProbes.replayed(first)
            + "; retry: "
            + MvcProbes.replayed(retry)
            + "; interceptor failed on: "
            + Shapes.failedOn.get(key)
            + "; sends: "
            + Shapes.sendsOf(key);
    assertThat(Shapes.failedOn.get(key)).as("the interceptor's turn (%s)", facts).isNotNull();
    assertThat(Shapes.sendsOf(key)).as("sends of the key (%s)", facts).isEqualTo(1);
    assertThat(retry.statusCode()).as("the retry (%s)", facts).isLessThan(500);
  }

  private void sendsAsTheWorkDid(
      String prefix, String mode, boolean holdTheWork, int sends, int replayed, String replayedBody)
      throws Exception {
    String key = EndpointClient.newKey();
    String path = prefix + mode;
    HttpResponse<byte[]> first =
        Shapes.HELD.firstAnswer(
            port(),
            "/shapes-block",
            false,
            holdTheWork,
            () -> post(path, key, "{}"),
            () -> Shapes.sendsOf(key) >= 1 && Shapes.failedOn.containsKey(key));
    String firstSeen = first.statusCode() + " " + EndpointClient.text(first);
    HttpResponse<byte[]> retry = MvcProbes.retryUntilAnswered(this, path, key);
    int sendsAfterRetry = Shapes.sendsOf(key);
    String facts =
        "first: "
            + firstSeen
            + "; retry: "
            + retry.statusCode()
            + " "
            + EndpointClient.text(retry)
            + "; interceptor failed on: "
            + Shapes.failedOn.get(key)
            + "; sends: "
            + sendsAfterRetry;
    assertThat(Shapes.failedOn.get(key)).as("the interceptor's turn (%s)", facts).isNotNull();
    assertThat(sendsAfterRetry).as("sends of the key (%s)", facts).isEqualTo(sends);
    assertThat(retry.statusCode()).as("the retry (%s)", facts).isEqualTo(replayed);
    assertThat(EndpointClient.text(retry)).as("the retry (%s)", facts).isEqualTo(replayedBody);
  }

  /** Registers the mode's interceptors for {@code /shapes/...}, failing on a key's first. */
  static final class RegisteringFilter extends OncePerRequestFilter {
    private static final Set<String> seen = ConcurrentHashMap.newKeySet();

    @Override
    protected void doFilterInternal(
        HttpServletRequest request, HttpServletResponse response, FilterChain chain)
        throws ServletException, IOException {
      String key = request.getHeader("Idempotency-Key");
      String uri = request.getRequestURI();
      if (key != null && uri.startsWith("/shapes/")) {
        String mode = uri.substring(uri.lastIndexOf('/') + 1);
        boolean first = seen.add(key);
        if (uri.startsWith("/shapes/stage/")) {
          WebAsyncUtils.getAsyncManager(request)
              .registerDeferredResultInterceptor(
                  "probeB.failing", new FailingDeferred(mode, key, first));
        } else {
          WebAsyncUtils.getAsyncManager(request)
              .registerCallableInterceptor("probeB.failing", new Failing(mode, key, first));
          if (mode.equals("post-twice")) {
            WebAsyncUtils.getAsyncManager(request)
                .registerCallableInterceptor("probeB.failing2", new Failing(mode, key, first));
          }
        }
      }
      chain.doFilter(request, response);
    }
  }

  private static void failed(String key, String where) {
    Shapes.failedOn.merge(
        key, where + "@" + Thread.currentThread().getName(), (a, b) -> a + "," + b);
  }

  /** A {@code CallableProcessingInterceptor} that fails or answers as its mode says. */
  static final class Failing implements CallableProcessingInterceptor {
    private final String mode;
    private final String key;
    private final boolean fails;

    Failing(String mode, String key, boolean fails) {
      this.mode = mode;
      this.key = key;
      this.fails = fails;
    }

    @Override
    public <T> void postProcess(NativeWebRequest request, Callable<T> task, Object result) {
      if (fails && !mode.startsWith("timeout-") && !mode.equals("after-completion")) {
        failed(key, "post");
        throw new IllegalStateException("probeB: postProcess fails");
      }
    }

    @Override
    public <T> Object handleTimeout(NativeWebRequest request, Callable<T> task) {
      if (fails && mode.equals("timeout-throws")) {
        failed(key, "timeout");
        throw new IllegalStateException("probeB: handleTimeout fails");
      }
      if (fails && mode.equals("timeout-value")) {
        failed(key, "timeout-value");
        return ResponseEntity.status(504).body("app-timeout");
      }
      return RESULT_NONE;
    }

    @Override
    public <T> void afterCompletion(NativeWebRequest request, Callable<T> task) {
      if (fails && mode.equals("after-completion")) {
        failed(key, "after");
        throw new IllegalStateException("probeB: afterCompletion fails");
      }
    }
  }

  /** A {@code DeferredResultProcessingInterceptor} that fails or answers as its mode says. */
  static final class FailingDeferred implements DeferredResultProcessingInterceptor {
    private final String mode;
    private final String key;
    private final boolean fails;

    FailingDeferred(String mode, String key, boolean fails) {
      this.mode = mode;
      this.key = key;
      this.fails = fails;
    }

    @Override
    public <T> void postProcess(
        NativeWebRequest request, DeferredResult<T> deferredResult, Object concurrentResult) {
      if (fails && !mode.startsWith("timeout-")) {
        failed(key, "deferred-post");
        throw new IllegalStateException("probeB: postProcess fails");
      }
    }

    @Override
    @SuppressWarnings("unchecked")
    public <T> boolean handleTimeout(NativeWebRequest request, DeferredResult<T> deferredResult) {
      if (fails && mode.equals("timeout-throws")) {
        failed(key, "deferred-timeout");
        throw new IllegalStateException("probeB: handleTimeout fails");
      }
      if (fails && mode.equals("timeout-answers")) {
        failed(key, "deferred-timeout-answers");
        ((DeferredResult<Object>) deferredResult)
            .setResult(ResponseEntity.status(504).body("app-timeout"));
        return false;
      }
      return true;
    }
  }

  /** The work's failure after it sent, which the controller maps to a kept 422. */
  static final class Refused extends RuntimeException {
    Refused(String message) {
      super(message);
    }
  }

  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(Shapes.class)
  static class ShapesApplication {
    @Bean
    FilterRegistrationBean<RegisteringFilter> probeBInterceptorFilter() {
      FilterRegistrationBean<RegisteringFilter> registration =
          new FilterRegistrationBean<>(new RegisteringFilter());
      registration.setOrder(-100);
      return registration;
    }
  }

  @RestController
  static class Shapes {
    static final AtomicInteger entered = new AtomicInteger();
    static final Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();
    static final Map<String, String> failedOn = new ConcurrentHashMap<>();

    /** What a later {@code Callable} read of its request after it sent, per key (probeC). */
    static final Map<String, String> reads = new ConcurrentHashMap<>();

    static final HeldExecutor HELD = new HeldExecutor();
    private static final SimpleAsyncTaskExecutor OWN = new SimpleAsyncTaskExecutor("probeB-own-");

    private static int send(String key) {
      return sends.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
    }

    @PostMapping("/shapes/callable/null")
    @IdempotentEndpoint
    @ResponseStatus(HttpStatus.CREATED)
    public Callable<String> nothing(@RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      return () -> {
        send(key);
        return null;
      };
    }

    @PostMapping("/shapes/callable/own-executor")
    @IdempotentEndpoint
    public WebAsyncTask<ResponseEntity<String>> ownExecutor(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      return new WebAsyncTask<>(
          null, OWN, () -> ResponseEntity.status(201).body("sent-" + send(key)));
    }

    @PostMapping("/shapes/callable/{mode}")
    @IdempotentEndpoint
    public Callable<Object> callable(
        @PathVariable("mode") String mode, @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      CountDownLatch answered = HELD.firstAnswered;
      if (mode.equals("later-stage")) {
        // more async work: the stage is the send, under way as the Callable returns it
        return () ->
            CompletableFuture.supplyAsync(
                () -> ResponseEntity.status(201).body("sent-" + send(key)));
      }
      return () -> {
        int n = send(key);
        answered.await(20, TimeUnit.SECONDS);
        return switch (mode) {
          case "exception-value" -> new Refused("refused-" + n); // returned, not thrown
          case "bad-gateway" -> ResponseEntity.status(502).body("failed-" + n);
          // more async work: the send happened, its answer comes as a completed stage
          case "later-completed" ->
              CompletableFuture.completedFuture(ResponseEntity.status(201).body("sent-" + n));
          case "later-refused" -> CompletableFuture.failedFuture(new Refused("refused-" + n));
          case "later-bad-gateway" ->
              CompletableFuture.completedFuture(ResponseEntity.status(502).body("failed-" + n));
          default -> ResponseEntity.status(201).body("sent-" + n);
        };
      };
    }

    @PostMapping("/shapes/later/{mode}")
    @IdempotentEndpoint
    public Callable<Object> later(
        @PathVariable("mode") String mode, @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      RequestContextHolder.currentRequestAttributes()
          .setAttribute("probeC", "set", RequestAttributes.SCOPE_REQUEST);
      Callable<ResponseEntity<String>> readsAfterItSent =
          () -> {
            int n = send(key);
            Object attribute =
                RequestContextHolder.currentRequestAttributes()
                    .getAttribute("probeC", RequestAttributes.SCOPE_REQUEST);
            reads.put(key, String.valueOf(attribute));
            return ResponseEntity.status(201).body("sent-" + n);
          };
      return () ->
          switch (mode) {
            case "later-deferred" -> {
              DeferredResult<ResponseEntity<String>> deferred = new DeferredResult<>();
              Thread thread =
                  new Thread(
                      () -> {
                        try {
                          Thread.sleep(200);
                        } catch (InterruptedException e) {
                          Thread.currentThread().interrupt();
                        }
                        deferred.setResult(ResponseEntity.status(201).body("sent-" + send(key)));
                      },
                      "probeC-later");
              thread.setDaemon(true);
              thread.start();
              yield deferred;
            }
            case "later-callable-reads" -> readsAfterItSent;
            case "later-task-reads" -> new WebAsyncTask<>(readsAfterItSent);
            case "later-stream" ->
                (StreamingResponseBody)
                    out -> out.write(("sent-" + send(key)).getBytes(StandardCharsets.UTF_8));
            case "later-emitter" -> {
              SseEmitter emitter = new SseEmitter();
              Thread thread =
                  new Thread(
                      () -> {
                        try {
                          Thread.sleep(200);
                          emitter.send(SseEmitter.event().data("sent-" + send(key)));
                          emitter.complete();
                        } catch (Exception e) {
                          emitter.completeWithError(e);
                        }
                      },
                      "probeC-emitter");
              thread.setDaemon(true);
              thread.start();
              yield emitter;
            }
            default -> throw new IllegalArgumentException(mode);
          };
    }

    @PostMapping("/shapes/stage/{mode}")
    @IdempotentEndpoint
    public CompletableFuture<Object> stage(
        @PathVariable("mode") String mode, @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      CountDownLatch answered = HELD.firstAnswered;
      return CompletableFuture.supplyAsync(
          () -> {
            int n = send(key);
            try {
              answered.await(20, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
            }
            ResponseEntity<String> sent = ResponseEntity.status(201).body("sent-" + n);
            // more async work: the send happened, its answer comes as a completed stage
            return switch (mode) {
              case "later-completed" -> CompletableFuture.completedFuture(sent);
              case "later-refused" -> CompletableFuture.failedFuture(new Refused("refused-" + n));
              default -> sent;
            };
          });
    }

    /** The provider's refusal, a kept answer: 422 with the refusal as its body. */
    @ExceptionHandler(Refused.class)
    public ResponseEntity<String> refused(Refused refused) {
      return ResponseEntity.status(422).body(refused.getMessage());
    }

    @PostMapping("/shapes-block")
    public Callable<String> block() {
      return HELD.block();
    }

    static int sendsOf(String key) {
      AtomicInteger n = sends.get(key);
      return n == null ? 0 : n.get();
    }
  }
}
