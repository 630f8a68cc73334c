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
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.core.task.TaskDecorator;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.context.request.NativeWebRequest;
import org.springframework.web.context.request.async.CallableProcessingInterceptor;
import org.springframework.web.context.request.async.WebAsyncUtils;
import org.springframework.web.filter.OncePerRequestFilter;

/**
 * probeQ, of fixshield (dbc8a542, 1ba6b4ee, 81b92fe9): {@code UninterruptedWork}'s detached run of
 * an outcome the starter follows ({@code AsyncWork#followReplacedOutcome}, {@code
 * Queued#runDetached} with nothing decorated on the request's thread) asks the application's task
 * decorator to wrap it on the thread of the async dispatch; fixshield made {@code continueDetached}
 * end the call when the decorator refuses there, but {@code runDetached} calls the decorator
 * outside any such guard. The set-up: a {@code Callable} that sends and returns more async work (a
 * completed {@code CompletableFuture}); an application's {@code CallableProcessingInterceptor}
 * (registered by a filter, ahead of the starter's) whose {@code postProcess} fails on the key's
 * first request, so Spring MVC dispatches that failure in place of the stage and the starter
 * follows the stage; the application's decorator refuses (throws) on a request's thread once the
 * key's send happened. SPEC 1: the call must still end (its outcome stored or the refusal its end),
 * so a retry gets an answer, never a 409 for ever, and the provider sends once.
 */
class MvcFollowedOutcomeDecoratorRefusalProbeTest extends MvcProbeApplication {

  MvcFollowedOutcomeDecoratorRefusalProbeTest() {
    super(FollowedApplication.class, "spring.mvc.async.request-timeout=5s");
  }

  @Override
  public int runs() {
    return Followed.entered.get();
  }

  // Was an open finding (severity medium: the send happened once, but the key stays in flight,
  // every retry a 409, and nothing stores the answer; fixshield's own comment on continueDetached
  // says such a call's lease is renewed until the process stops, after which a retry sends again,
  // a second send, SPEC 1; the renewal for ever is suspected, not measured here), probeQ, Boot 3.5
  // and 4.0 at 7efd6b9a: "[the retry (first: 500 <Tomcat's error page>; retry: 409
  // request-in-progress; interceptor failed: true; decorator refused: 1; sends: 1)] Expecting
  // actual: 409 not to be in: [409, 503]" after 20 s of retries. UninterruptedWork's detached(..)
  // runDetached() called starterRun.decorated(..) for a follower's run (queuedHere false) with no
  // guard: the decorator's refusal left followReplacedOutcome (state already TAKEN, late set) as
  // an exception on the async dispatch, and nothing reported the call. Fixed by fixdecor:
  // DetachedWork.decorateAndRun, the one path of runDetached's followed outcome and
  // continueDetached, ends the call when the decorator refuses there (or its wrapper never runs
  // the work); here the Callable had sent (it ran and returned the outcome), so the call is
  // recorded as answered without its body (the retry gets 422 response-not-stored), never
  // released.
  @Test
  void aFollowedStageWhoseDecoratorRefusesStillEndsTheCall() throws Exception {
    String key = EndpointClient.newKey();
    Refusing.armedKey = key;
    HttpResponse<byte[]> first;
    try {
      first = post("/followed/later-completed", key, "{}");
    } finally {
      // the first request's dispatch is over once it answered
      Refusing.armedKey = null;
    }
    HttpResponse<byte[]> retry =
        MvcProbes.retryUntilAnswered(this, "/followed/later-completed", key);
    String facts =
        "first: "
            + first.statusCode()
            + " "
            + EndpointClient.text(first)
            + "; retry: "
            + retry.statusCode()
            + " "
            + EndpointClient.text(retry)
            + "; interceptor failed: "
            + Followed.failed.contains(key)
            + "; decorator refused: "
            + Refusing.refused.get()
            + "; sends: "
            + Followed.sendsOf(key);
    assertThat(Followed.failed).as("the interceptor's turn (%s)", facts).contains(key);
    assertThat(Followed.sendsOf(key)).as("sends of the key (%s)", facts).isEqualTo(1);
    assertThat(retry.statusCode()).as("the retry (%s)", facts).isNotIn(409, 503);
    assertThat(retry.statusCode()).as("the retry (%s)", facts).isLessThan(500);
  }

  /** Registers the failing interceptor for {@code /followed/...} on a key's first request. */
  static final class RegisteringFilter extends OncePerRequestFilter {
    private static final Set<String> seen = ConcurrentHashMap.newKeySet();

    @Override
    protected void doFilterInternal(
        HttpServletRequest request, HttpServletResponse response, FilterChain chain)
        throws ServletException, IOException {
      String key = request.getHeader("Idempotency-Key");
      if (key != null && request.getRequestURI().startsWith("/followed/") && seen.add(key)) {
        WebAsyncUtils.getAsyncManager(request)
            .registerCallableInterceptor("probeQ.failing", new Failing(key));
      }
      chain.doFilter(request, response);
    }
  }

  /** A {@code CallableProcessingInterceptor} whose {@code postProcess} fails. */
  static final class Failing implements CallableProcessingInterceptor {
    private final String key;

    Failing(String key) {
      this.key = key;
    }

    @Override
    public <T> void postProcess(NativeWebRequest request, Callable<T> task, Object result) {
      Followed.failed.add(key);
      throw new IllegalStateException("probeQ: postProcess fails");
    }
  }

  /**
   * The application's decorator: refuses on a request's thread (Tomcat's) once the armed key's send
   * happened, which is where the starter decorates the followed stage's run; else wraps.
   */
  static final class Refusing implements TaskDecorator {
    static volatile String armedKey;
    static final AtomicInteger refused = new AtomicInteger();

    @Override
    public Runnable decorate(Runnable runnable) {
      String key = armedKey;
      if (key != null
          && Followed.sendsOf(key) >= 1
          && Thread.currentThread().getName().startsWith("http-nio")) {
        refused.incrementAndGet();
        throw new IllegalStateException("probeQ: no permit left for a task");
      }
      return runnable;
    }
  }

  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(Followed.class)
  static class FollowedApplication {
    @Bean
    FilterRegistrationBean<RegisteringFilter> probeQInterceptorFilter() {
      FilterRegistrationBean<RegisteringFilter> registration =
          new FilterRegistrationBean<>(new RegisteringFilter());
      registration.setOrder(-100);
      return registration;
    }

    @Bean
    Refusing probeQRefusingTaskDecorator() {
      return new Refusing();
    }
  }

  @RestController
  static class Followed {
    static final AtomicInteger entered = new AtomicInteger();
    static final Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();
    static final Set<String> failed = ConcurrentHashMap.newKeySet();

    static int sendsOf(String key) {
      AtomicInteger n = sends.get(key);
      return n == null ? 0 : n.get();
    }

    /** Sends, then answers with more async work: a completed stage holding the send's 201. */
    @PostMapping("/followed/later-completed")
    @IdempotentEndpoint
    public Callable<Object> laterCompleted(@RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      return () -> {
        int n = sends.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
        return CompletableFuture.completedFuture(ResponseEntity.status(201).body("sent-" + n));
      };
    }
  }
}
