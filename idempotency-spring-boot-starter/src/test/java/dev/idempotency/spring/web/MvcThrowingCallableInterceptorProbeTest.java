package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.net.http.HttpResponse;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.context.request.NativeWebRequest;
import org.springframework.web.context.request.async.CallableProcessingInterceptor;
import org.springframework.web.context.request.async.DeferredResult;
import org.springframework.web.context.request.async.DeferredResultProcessingInterceptor;
import org.springframework.web.context.request.async.WebAsyncUtils;
import org.springframework.web.filter.OncePerRequestFilter;

/**
 * probeX, of 11e7141 ({@link TaskThreadContext}): a request's {@code CallableProcessingInterceptor}
 * that fails, now that the interceptors run on the starter's threads too. The interceptor is
 * registered by a filter (as Spring Security's is) and fails only on the key's first request, so
 * the retry is clean: {@code post} fails in {@code postProcess} on every thread, after the work
 * sent; {@code post-after} does too, registered by the handler method (after the starter's own
 * interceptor, whose {@code postProcess} so runs after it); {@code post-refused} does too, while
 * the work itself fails after it sent, with a failure the controller maps to a kept 422; {@code
 * post-reads} never fails by itself but reads its request in {@code postProcess} (its header and
 * URI), which the starter's thread may do after the request ended; {@code pre-starter} fails in
 * {@code preProcess} on the starter's thread only (the work must not run there; nothing sent, so a
 * release is right); {@code stage-post}, a {@code DeferredResultProcessingInterceptor}, fails in
 * {@code postProcess} after a {@code CompletableFuture} handler's stage sent ({@code
 * stage-post-refused}: the stage failed after it sent, mapped to a kept 422; {@code deferred-post}:
 * an application's own {@code DeferredResult}, on time only). On time (the work begins at once) and
 * taken over (queued behind a held one-thread executor at a 1 s timeout). SPEC 1: the work runs
 * (sends) at most once per key, and a retry after a send is replayed, never sent again. One
 * application on a real Redis.
 */
class MvcThrowingCallableInterceptorProbeTest extends MvcProbeApplication {

  MvcThrowingCallableInterceptorProbeTest() {
    super(
        ThrowingApplication.class,
        "spring.mvc.async.request-timeout=1s",
        "spring.task.execution.pool.core-size=1",
        "spring.task.execution.pool.max-size=1");
  }

  @Override
  public int runs() {
    return Throwing.entered.get();
  }

  /**
   * Each row: the first request's answer, then retries until one is no longer in progress; the work
   * must have run (sent) at most once, and once it sent, the retry is its replay (201). These rows
   * pass on Boot 3.5 and 4.0: an interceptor that fails in {@code preProcess} on the starter's
   * thread (the work does not run there: nothing sent, the key released, the retry sends once), and
   * one that reads its request in {@code postProcess} after it ended (detached, taken over), and,
   * since fixpost, one that fails in {@code postProcess} after the work sent, taken over ({@link
   * TaskThreadContext#call} keeps the work's own result once the work ran, the interceptor's
   * failure logged at WARN: first 409, retry 201 "sent-1").
   */
  @ParameterizedTest(name = "{0}, queued={1}, held={2}")
  @CsvSource({
    "pre-starter,false,false",
    "pre-starter,true,true",
    "post-reads,false,true",
    "post-reads,true,true",
    "post,true,true"
  })
  void aFailingInterceptorNeverMakesASecondSend(String mode, boolean queued, boolean held)
      throws Exception {
    aFailingInterceptorSendsOnce(mode, queued, held);
  }

  /**
   * An interceptor whose {@code postProcess} fails after the work sent, on time (the work begins at
   * once) and taken over. Was an open finding on time (medium: a second send, SPEC 1): the
   * starter's thread kept the work's result ({@link TaskThreadContext#call}), but Spring MVC's own
   * {@code CallableInterceptorChain} on its task thread (task-1) also runs the interceptor, and its
   * {@code postProcess} failure became the request's result: dispatched with it and answered 500,
   * the starter recorded that rendered 500 (a 5xx releases the key), though its {@code
   * AsyncTimeouts#postProcess} saw the work's 201, and the retry sent again (first 500, retry 201
   * "sent-2"; on Boot 3.5 and 4.0: "sends of the key (...) expected: 1 but was: 2"). Now the async
   * dispatch that carries another result than the one {@code AsyncTimeouts#postProcess} saw records
   * the work's own ({@link AsyncTimeouts#outcomeReplaced}): the client still gets the 500, and the
   * retry the work's 201 "sent-1", replayed. The same whether the interceptor was registered before
   * the starter's ({@code post}, by a filter) or after it ({@code post-after}, by the handler
   * method), since Spring MVC's chain gives every {@code postProcess} the work's own result.
   */
  @ParameterizedTest(name = "{0}, queued={1}, held={2}")
  @CsvSource({"post,false,false", "post-after,false,false", "post-after,true,true"})
  void aPostProcessThatFailsAfterTheSendNeverMakesASecondSend(
      String mode, boolean queued, boolean held) throws Exception {
    aFailingInterceptorSendsOnce(mode, queued, held);
  }

  /**
   * The work fails after it sent, with a failure the controller's {@code @ExceptionHandler} maps to
   * a kept 422, and an interceptor's {@code postProcess} then fails too: the work's own failure is
   * the call's outcome, resolved as on time (422, stored), not the interceptor's (a 500, which
   * would release the key and the retry would send again). The retry is the 422 replayed:
   * "refused-1".
   */
  @ParameterizedTest(name = "{0}, queued={1}, held={2}")
  @CsvSource({"post-refused,false,false", "post-refused,true,true"})
  void aPostProcessThatFailsAfterAMappedFailureKeepsIt(String mode, boolean queued, boolean held)
      throws Exception {
    aFailingInterceptorSendsOnce(mode, queued, held, 422, "refused-1");
  }

  /**
   * The same for a {@code DeferredResultProcessingInterceptor} (registered by a filter) that fails
   * in {@code postProcess} after the work sent, on time: a {@code CompletableFuture} handler whose
   * stage returns its 201 ({@code stage-post}), one whose stage fails after it sent with a failure
   * the controller maps to a kept 422 ({@code stage-post-refused}: the stage's failure reaches
   * Spring MVC wrapped in a {@code CompletionException}, which it unwraps), and an application's
   * own {@code DeferredResult} set to 201 from another thread ({@code deferred-post}). Was an open
   * finding (medium: a second send, SPEC 1): Spring MVC's {@code DeferredResultInterceptorChain}
   * makes that failure the request's result, as its {@code CallableInterceptorChain} does for a
   * {@code Callable}, and {@link AsyncTimeouts#outcomeReplaced} looked only at a {@code Callable}'s
   * outcome, so the rendered 500 released the key and the retry sent again (on Boot 3.5 and 4.0,
   * ontime: "sends of the key (first: 500 {..."path":"/throwing-stage/stage-post"}; retry: 201
   * sent-2; interceptor failed on: deferred-post@http-nio-auto-1-exec-8; sends: 2) expected: 1 but
   * was: 2"). Now the async dispatch that carries another result than the one set on Spring MVC's
   * {@code DeferredResult} records the work's own, as the advisor observed it: the client still
   * gets the 500, the retry the work's answer, replayed.
   */
  @ParameterizedTest(name = "{0}")
  @CsvSource({
    "/throwing-stage/,stage-post,201,sent-1",
    "/throwing-stage/,stage-post-refused,422,refused-1",
    "/throwing-deferred/,deferred-post,201,sent-1"
  })
  void aDeferredPostProcessThatFailsAfterTheSendNeverMakesASecondSend(
      String prefix, String mode, int replayed, String replayedBody) throws Exception {
    aFailingInterceptorSendsOnce(prefix, mode, false, false, replayed, replayedBody);
  }

  private void aFailingInterceptorSendsOnce(String mode, boolean queued, boolean held)
      throws Exception {
    aFailingInterceptorSendsOnce(mode, queued, held, 201, "sent-1");
  }

  private void aFailingInterceptorSendsOnce(
      String mode, boolean queued, boolean held, int replayed, String replayedBody)
      throws Exception {
    aFailingInterceptorSendsOnce("/throwing/", mode, queued, held, replayed, replayedBody);
  }

  private void aFailingInterceptorSendsOnce(
      String prefix, String mode, boolean queued, boolean held, int replayed, String replayedBody)
      throws Exception {
    String key = EndpointClient.newKey();
    String path = prefix + mode;
    HttpResponse<byte[]> first =
        Throwing.HELD.firstAnswer(
            port(),
            "/throwing-block",
            queued,
            held,
            () -> post(path, key, "{}"),
            () -> Throwing.sendsOf(key) == 1 || Throwing.failedOn.containsKey(key));
    String firstSeen = first.statusCode() + " " + EndpointClient.text(first);
    HttpResponse<byte[]> retry = MvcProbes.retryUntilAnswered(this, path, key);
    int sendsAfterRetry = Throwing.sendsOf(key);
    String facts =
        "first: "
            + firstSeen
            + "; retry: "
            + retry.statusCode()
            + " "
            + EndpointClient.text(retry)
            + "; interceptor failed on: "
            + Throwing.failedOn.get(key)
            + "; sends: "
            + sendsAfterRetry;
    assertThat(sendsAfterRetry).as("sends of the key (%s)", facts).isEqualTo(1);
    assertThat(retry.statusCode()).as("the retry (%s)", facts).isEqualTo(replayed);
    assertThat(EndpointClient.text(retry)).as("the retry (%s)", facts).isEqualTo(replayedBody);
  }

  /** Registers the failing interceptor for {@code /throwing/{mode}}, failing on a key's first. */
  static final class RegisteringFilter extends OncePerRequestFilter {
    private static final Set<String> seen = ConcurrentHashMap.newKeySet();

    @Override
    protected void doFilterInternal(
        HttpServletRequest request, HttpServletResponse response, FilterChain chain)
        throws ServletException, IOException {
      String key = request.getHeader("Idempotency-Key");
      String uri = request.getRequestURI();
      if (key != null
          && (uri.startsWith("/throwing/")
              || uri.startsWith("/throwing-stage/")
              || uri.startsWith("/throwing-deferred/"))) {
        String mode = uri.substring(uri.lastIndexOf('/') + 1);
        if (mode.startsWith("stage-post") || mode.equals("deferred-post")) {
          // a CompletableFuture's or a DeferredResult's: a DeferredResult interceptor
          WebAsyncUtils.getAsyncManager(request)
              .registerDeferredResultInterceptor(
                  "probeX.failing", new FailingDeferred(key, seen.add(key)));
        } else if (!mode.equals("post-after")) { // that one the handler method registers
          WebAsyncUtils.getAsyncManager(request)
              .registerCallableInterceptor("probeX.failing", new Failing(mode, key, seen.add(key)));
        }
      }
      chain.doFilter(request, response);
    }
  }

  /** Fails as its mode says, on its key's first request only. */
  static final class Failing implements CallableProcessingInterceptor {
    private final String mode;
    private final String key;
    private final boolean fails;

    Failing(String mode, String key, boolean fails) {
      this.mode = mode;
      this.key = key;
      this.fails = fails;
    }

    private static boolean startersThread() {
      return Thread.currentThread().getName().startsWith("idempotent-endpoint-");
    }

    @Override
    public <T> void preProcess(NativeWebRequest request, Callable<T> task) {
      if (fails && mode.equals("pre-starter") && startersThread()) {
        Throwing.failedOn.merge(
            key, "pre@" + Thread.currentThread().getName(), (a, b) -> a + "," + b);
        throw new IllegalStateException("probeX: preProcess fails");
      }
    }

    @Override
    public <T> void postProcess(NativeWebRequest request, Callable<T> task, Object result) {
      if (mode.equals("post-reads")) {
        // an ordinary interceptor that reads its request in postProcess (a metric's tag, a log)
        try {
          HttpServletRequest servlet = request.getNativeRequest(HttpServletRequest.class);
          String read = request.getHeader("Idempotency-Key") + " " + servlet.getRequestURI();
          Throwing.failedOn.merge(
              key,
              "read@" + Thread.currentThread().getName() + ":" + read.length(),
              (a, b) -> a + "," + b);
        } catch (RuntimeException e) {
          Throwing.failedOn.merge(
              key,
              "post-reads@" + Thread.currentThread().getName() + ":" + e,
              (a, b) -> a + "," + b);
          throw e;
        }
      }
      if (fails && !mode.equals("pre-starter") && !mode.equals("post-reads")) {
        Throwing.failedOn.merge(
            key, "post@" + Thread.currentThread().getName(), (a, b) -> a + "," + b);
        throw new IllegalStateException("probeX: postProcess fails");
      }
    }
  }

  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(Throwing.class)
  static class ThrowingApplication {
    @Bean
    FilterRegistrationBean<RegisteringFilter> failingInterceptorFilter() {
      FilterRegistrationBean<RegisteringFilter> registration =
          new FilterRegistrationBean<>(new RegisteringFilter());
      registration.setOrder(-100);
      return registration;
    }
  }

  /**
   * Fails in {@code postProcess} after a {@code DeferredResult} got its value, on a key's first.
   */
  static final class FailingDeferred implements DeferredResultProcessingInterceptor {
    private final String key;
    private final boolean fails;

    FailingDeferred(String key, boolean fails) {
      this.key = key;
      this.fails = fails;
    }

    @Override
    public <T> void postProcess(
        NativeWebRequest request, DeferredResult<T> deferredResult, Object concurrentResult) {
      if (fails) {
        Throwing.failedOn.merge(
            key, "deferred-post@" + Thread.currentThread().getName(), (a, b) -> a + "," + b);
        throw new IllegalStateException("probeX: postProcess fails");
      }
    }
  }

  /** The work's failure after it sent, which the controller maps to a kept 422. */
  static final class Refused extends RuntimeException {
    Refused(String message) {
      super(message);
    }
  }

  @RestController
  static class Throwing {
    static final AtomicInteger entered = new AtomicInteger();
    static final Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();
    static final Map<String, String> failedOn = new ConcurrentHashMap<>();
    static final HeldExecutor HELD = new HeldExecutor();

    @PostMapping("/throwing/{mode}")
    @IdempotentEndpoint
    public Callable<ResponseEntity<String>> work(
        @PathVariable("mode") String mode,
        @RequestHeader("Idempotency-Key") String key,
        HttpServletRequest request) {
      entered.incrementAndGet();
      if (mode.equals("post-after")) {
        // registered after the starter's own interceptor (its HandlerInterceptor registers it)
        WebAsyncUtils.getAsyncManager(request)
            .registerCallableInterceptor(
                "probeX.failing", new Failing(mode, key, RegisteringFilter.seen.add(key)));
      }
      CountDownLatch answered = HELD.firstAnswered;
      return () -> {
        int n = sends.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
        answered.await(20, TimeUnit.SECONDS);
        if (mode.equals("post-refused")) {
          throw new Refused("refused-" + n); // after the send: the provider refused it
        }
        return ResponseEntity.status(201).body("sent-" + n);
      };
    }

    @PostMapping("/throwing-stage/{mode}")
    @IdempotentEndpoint
    public CompletableFuture<ResponseEntity<String>> stage(
        @PathVariable("mode") String mode, @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      return CompletableFuture.supplyAsync(
          () -> {
            int n = sends.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
            if (mode.equals("stage-post-refused")) {
              throw new Refused("refused-" + n); // after the send: the provider refused it
            }
            return ResponseEntity.status(201).body("sent-" + n);
          });
    }

    @PostMapping("/throwing-deferred/{mode}")
    @IdempotentEndpoint
    public DeferredResult<ResponseEntity<String>> deferred(
        @PathVariable("mode") String mode, @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      DeferredResult<ResponseEntity<String>> result = new DeferredResult<>();
      CompletableFuture.runAsync(
          () -> {
            int n = sends.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
            result.setResult(ResponseEntity.status(201).body("sent-" + n));
          });
      return result;
    }

    /** The provider's refusal, a kept answer: 422 with the refusal as its body. */
    @ExceptionHandler(Refused.class)
    public ResponseEntity<String> refused(Refused refused) {
      return ResponseEntity.status(422).body(refused.getMessage());
    }

    @PostMapping("/throwing-block")
    public Callable<String> block() {
      return HELD.block();
    }

    static int sendsOf(String key) {
      AtomicInteger n = sends.get(key);
      return n == null ? 0 : n.get();
    }
  }
}
