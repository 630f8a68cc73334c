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
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.context.request.NativeWebRequest;
import org.springframework.web.context.request.async.CallableProcessingInterceptor;
import org.springframework.web.context.request.async.WebAsyncUtils;
import org.springframework.web.filter.OncePerRequestFilter;

/**
 * probeZ, of fixpost (merge 8637a0b): a request's {@code CallableProcessingInterceptor} that fails
 * in a phase, on the paths MvcThrowingCallableInterceptorProbeTest leaves out. The interceptor is
 * registered by a filter (as Spring Security's is), so it comes before the starter's own in Spring
 * MVC's chain, and fails only on the key's first request, so the retry is clean: {@code post} fails
 * in {@code postProcess} on every thread after the work sent, here on the detached path (the work
 * began on time and outlived its 1 s timeout); {@code timeout} fails in {@code handleTimeout}
 * (Spring MVC's chain returns that failure as the async result, and the starter's own {@code
 * handleTimeout}, after it, is not asked), detached and taken over; {@code pre-spring} fails in
 * {@code preProcess} on Spring MVC's task thread only (the shielded work never starts: nothing
 * sent). SPEC 1: the work runs (sends) at most once per key, and a retry after a send is its
 * replay, never a second send. One application on a real Redis, a one-thread async executor.
 */
class MvcInterceptorPhasesProbeTest extends MvcProbeApplication {

  MvcInterceptorPhasesProbeTest() {
    super(
        PhasesApplication.class,
        "spring.mvc.async.request-timeout=1s",
        "spring.task.execution.pool.core-size=1",
        "spring.task.execution.pool.max-size=1");
  }

  @Override
  public int runs() {
    return Phases.entered.get();
  }

  /**
   * Each row: the first request's answer, then retries until one is no longer in progress; the work
   * must have sent once, and the retry must be its replay (201 "sent-1"). {@code queued}: the work
   * waits behind a held executor and is taken over at the timeout; else it begins at once, and
   * {@code held} keeps it going until the client got the timeout's answer (detached).
   */
  @ParameterizedTest(name = "{0}, queued={1}, held={2}")
  @CsvSource({
    "post,false,true",
    "timeout,false,true",
    "timeout,true,true",
    "pre-spring,false,false"
  })
  void anInterceptorThatFailsInAPhaseNeverMakesASecondSend(
      String mode, boolean queued, boolean held) throws Exception {
    String key = EndpointClient.newKey();
    String path = "/probeZ/phase/" + mode;
    HttpResponse<byte[]> first =
        Phases.HELD.firstAnswer(
            port(),
            "/probeZ/phase-block",
            queued,
            held,
            () -> post(path, key, "{}"),
            () -> Phases.sendsOf(key) == 1 || Phases.failedOn.containsKey(key));
    String firstSeen = first.statusCode() + " " + EndpointClient.text(first);
    HttpResponse<byte[]> retry = MvcProbes.retryUntilAnswered(this, path, key);
    String facts =
        "first: "
            + firstSeen
            + "; retry: "
            + MvcProbes.replayed(retry)
            + "; interceptor failed on: "
            + Phases.failedOn.get(key)
            + "; sends: "
            + Phases.sendsOf(key);
    assertThat(Phases.failedOn.get(key)).as("the interceptor failed (%s)", facts).isNotNull();
    assertThat(Phases.sendsOf(key)).as("sends of the key (%s)", facts).isEqualTo(1);
    assertThat(retry.statusCode()).as("the retry (%s)", facts).isEqualTo(201);
    assertThat(EndpointClient.text(retry)).as("the retry (%s)", facts).isEqualTo("sent-1");
  }

  /**
   * Registers the failing interceptor for {@code /probeZ/phase/{mode}}, failing on a key's first.
   */
  static final class RegisteringFilter extends OncePerRequestFilter {
    private static final Set<String> seen = ConcurrentHashMap.newKeySet();

    @Override
    protected void doFilterInternal(
        HttpServletRequest request, HttpServletResponse response, FilterChain chain)
        throws ServletException, IOException {
      String key = request.getHeader("Idempotency-Key");
      String uri = request.getRequestURI();
      if (key != null && uri.startsWith("/probeZ/phase/")) {
        String mode = uri.substring("/probeZ/phase/".length());
        WebAsyncUtils.getAsyncManager(request)
            .registerCallableInterceptor("probeZ.failing", new Failing(mode, key, seen.add(key)));
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

    private void failed(String phase) {
      Phases.failedOn.merge(
          key, phase + "@" + Thread.currentThread().getName(), (a, b) -> a + "," + b);
    }

    @Override
    public <T> void preProcess(NativeWebRequest request, Callable<T> task) {
      if (fails
          && mode.equals("pre-spring")
          && !Thread.currentThread().getName().startsWith("idempotent-endpoint-")) {
        failed("pre");
        throw new IllegalStateException("probeZ: preProcess fails on Spring MVC's thread");
      }
    }

    @Override
    public <T> void postProcess(NativeWebRequest request, Callable<T> task, Object result) {
      if (fails && mode.equals("post")) {
        failed("post");
        throw new IllegalStateException("probeZ: postProcess fails");
      }
    }

    @Override
    public <T> Object handleTimeout(NativeWebRequest request, Callable<T> task) {
      if (fails && mode.equals("timeout")) {
        failed("timeout");
        throw new IllegalStateException("probeZ: handleTimeout fails");
      }
      return RESULT_NONE;
    }
  }

  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(Phases.class)
  static class PhasesApplication {
    @Bean
    FilterRegistrationBean<RegisteringFilter> phasesInterceptorFilter() {
      FilterRegistrationBean<RegisteringFilter> registration =
          new FilterRegistrationBean<>(new RegisteringFilter());
      registration.setOrder(-100);
      return registration;
    }
  }

  @RestController
  static class Phases {
    static final AtomicInteger entered = new AtomicInteger();
    static final Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();
    static final Map<String, String> failedOn = new ConcurrentHashMap<>();
    static final HeldExecutor HELD = new HeldExecutor();

    /** Sends, then (held) waits until the client got the first answer, and answers 201. */
    @PostMapping("/probeZ/phase/{mode}")
    @IdempotentEndpoint
    public Callable<ResponseEntity<String>> work(
        @PathVariable("mode") String mode, @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      CountDownLatch answered = HELD.firstAnswered;
      return () -> {
        int n = sends.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
        answered.await(20, TimeUnit.SECONDS);
        return ResponseEntity.status(201).body("sent-" + n);
      };
    }

    @PostMapping("/probeZ/phase-block")
    public Callable<String> block() {
      return HELD.block();
    }

    static int sendsOf(String key) {
      AtomicInteger n = sends.get(key);
      return n == null ? 0 : n.get();
    }
  }
}
