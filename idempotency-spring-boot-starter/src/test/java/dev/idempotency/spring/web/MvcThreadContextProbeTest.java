package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletRequestWrapper;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.net.http.HttpResponse;
import java.security.Principal;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.core.task.TaskDecorator;
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
 * Probe (probeR) of the MVC work the starter runs on its own threads (a {@code Callable} shielded
 * from Spring MVC's interrupt, or taken over when queued at a timeout or refused): it copies the
 * MDC, the locale and the request attributes to that thread, and nothing else. An application with
 * Spring Security has its caller's identity in a thread-local ({@code SecurityContextHolder}),
 * which Spring Security carries to Spring MVC's async task thread with a {@code
 * CallableProcessingInterceptor} it registers on each request's {@code WebAsyncManager} ({@code
 * WebAsyncManagerIntegrationFilter}: {@code beforeConcurrentHandling} captures the context, {@code
 * preProcess} sets it on the task thread, {@code postProcess} clears it), and its request wrapper
 * ({@code SecurityContextHolderAwareRequestWrapper}) answers {@code getUserPrincipal} and {@code
 * isUserInRole} from that thread-local. Spring Security is not on the starter's test classpath (its
 * auto-configuration would secure every test application), so this application does the same with
 * its own holder ({@link CurrentUser}), filter and interceptor, as Spring Security's do (module
 * spring-security-tests runs the same reads under the real Spring Security, on Boot 3.5 and 4.0:
 * {@code SpringSecurityOnStarterThreadsTest}). The work sends, then reads its caller (an audit
 * line, say): through the holder, or through its request's {@code getUserPrincipal()}. On Spring
 * MVC alone (the unguarded control) the work reads it; each guarded key must send once (SPEC 1), on
 * time, taken over (queued behind a held one-thread executor at a 1 s timeout) or detached (begun
 * on time, read after the timeout), and does: the starter gives its threads the request's callable
 * interceptors and the application's task decorator ({@link TaskThreadContext}). One application on
 * a real Redis.
 */
class MvcThreadContextProbeTest extends MvcProbeApplication {

  MvcThreadContextProbeTest() {
    super(
        ThreadContextApplication.class,
        "spring.mvc.async.request-timeout=1s",
        "spring.task.execution.pool.core-size=1",
        "spring.task.execution.pool.max-size=1");
  }

  @Override
  public int runs() {
    return Audited.entered.get();
  }

  /**
   * The control: the same work, unguarded, on Spring MVC alone, reads its caller through the holder
   * and through its request. Passes on Boot 3.5 and 4.0.
   */
  @ParameterizedTest
  @CsvSource({"holder", "principal", "tenant"})
  void springMvcAloneGivesTheWorkItsCaller(String how) throws Exception {
    HttpResponse<byte[]> answer =
        post("/probeR/unguarded/" + how, null, "{}", "X-User", "alice", "X-Tenant", "alice");
    assertThat(answer.statusCode()).as(EndpointClient.text(answer)).isEqualTo(201);
    assertThat(EndpointClient.text(answer)).contains("alice");
  }

  /**
   * Work that sends, then reads its caller, on time (no timeout at all), taken over, or detached:
   * the starter's thread has its caller, as Spring MVC's task thread would (the request's callable
   * interceptors and the application's task decorator: {@link TaskThreadContext}), so it sends once
   * and the retry gets its answer replayed.
   */
  /*
   * Was an open finding (probeR, on 5cfa0b8; medium-high: a second send, SPEC 1, with no timeout
   * at all), all eight rows failing on Boot 3.5 and 4.0: "sends for the key (the work's reads:
   * [failed: no caller on thread idempotent-endpoint-1, ...]; first answer 500 ...; last 500 ...)
   * expected: 1 but was: 3" (the principal rows "no principal on thread idempotent-endpoint-1";
   * queued: "failed: no caller on thread idempotent-endpoint-taken-over-1", first answer 409; the
   * tenant rows "failed: no tenant on thread idempotent-endpoint-1"). UninterruptedWork ran the
   * work with only the MDC, the locale and RequestContextHolder copied. Fixed by TaskThreadContext:
   * the request's CallableProcessingInterceptors run around the work on the starter's thread as
   * Spring MVC's CallableInterceptorChain runs them, and the application's TaskDecorator wraps the
   * starter's task; the rows pass on Boot 3.5 and 4.0.
   */
  @ParameterizedTest
  @CsvSource({
    "holder, on-time",
    "principal, on-time",
    "holder, queued",
    "principal, queued",
    "holder, detached",
    "principal, detached",
    "tenant, on-time",
    "tenant, queued"
  })
  void workThatReadsItsCallerAfterItSentSendsOnce(String how, String mode) throws Exception {
    String path = "/probeR/audited/" + how;
    String key = EndpointClient.newKey();
    HttpResponse<byte[]> first = firstAnswer(path, key, mode);
    HttpResponse<byte[]> last = retryUntilAnswered(path, key);
    if (last.statusCode() >= 500) {
      last = retryUntilAnswered(path, key); // the client retries a 5xx too
    }
    assertThat(Audited.sendsOf(key))
        .as(
            "sends for the key (the work's reads: %s; first answer %s; last %s)",
            Audited.reads.get(key),
            first.statusCode() + " " + EndpointClient.text(first),
            MvcProbes.replayed(last))
        .isEqualTo(1);
    assertThat(EndpointClient.text(last)).as(MvcProbes.replayed(last)).contains("alice");
  }

  /** A smoke check of the rows' plumbing: the guarded endpoint answers at all. */
  @Test
  void theGuardedEndpointAnswers() throws Exception {
    HttpResponse<byte[]> answer =
        post("/probeR/audited/none", EndpointClient.newKey(), "{}", "X-User", "alice");
    assertThat(answer.statusCode()).as(EndpointClient.text(answer)).isEqualTo(201);
  }

  private HttpResponse<byte[]> retryUntilAnswered(String path, String key) throws Exception {
    HttpResponse<byte[]> retry;
    long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
    do {
      retry = post(path, key, "{}", "X-User", "alice", "X-Tenant", "alice");
    } while ((retry.statusCode() == 409 || retry.statusCode() == 503)
        && System.nanoTime() < deadline);
    return retry;
  }

  /**
   * The first post of {@code key}: on time; or its work queued behind a held executor (taken over
   * at the timeout); or begun at once and held until its client got the timeout's answer. Waits (20
   * s at most) until the work read its caller, or failed.
   */
  private HttpResponse<byte[]> firstAnswer(String path, String key, String mode) throws Exception {
    return Audited.HELD.firstAnswer(
        port(),
        "/probeR/block",
        mode.equals("queued"),
        !mode.equals("on-time"),
        () -> post(path, key, "{}", "X-User", "alice", "X-Tenant", "alice"),
        () -> Audited.reads.containsKey(key));
  }

  /** The caller of the request on this thread, as Spring Security's SecurityContextHolder. */
  static final class CurrentUser {
    private static final ThreadLocal<String> USER = new ThreadLocal<>();

    private CurrentUser() {}

    static String get() {
      return USER.get();
    }

    static String require() {
      String user = USER.get();
      if (user == null) {
        throw new IllegalStateException("no caller on thread " + Thread.currentThread().getName());
      }
      return user;
    }
  }

  /**
   * A tenant for the request's thread, set by the caller filter and carried to Spring MVC's async
   * task thread only by the application's {@code TaskDecorator} (which Spring Boot applies to its
   * {@code applicationTaskExecutor}, Spring MVC's), as multi-tenant applications do.
   */
  static final class Tenant {
    static final ThreadLocal<String> TENANT = new ThreadLocal<>();

    private Tenant() {}

    static String require() {
      String tenant = TENANT.get();
      if (tenant == null) {
        throw new IllegalStateException("no tenant on thread " + Thread.currentThread().getName());
      }
      return tenant;
    }
  }

  /**
   * As Spring Security's filters: sets the caller (from X-User) for the request's thread, carries
   * it to Spring MVC's async task thread with a {@code CallableProcessingInterceptor} (as {@code
   * WebAsyncManagerIntegrationFilter} does), and wraps the request so that {@code getUserPrincipal}
   * answers from the current thread's caller (as {@code SecurityContextHolderAwareRequestWrapper}).
   */
  static final class CallerFilter extends OncePerRequestFilter {
    static final String KEY = CallerFilter.class.getName();

    @Override
    protected void doFilterInternal(
        HttpServletRequest request, HttpServletResponse response, FilterChain chain)
        throws ServletException, IOException {
      String user = request.getHeader("X-User");
      String previous = CurrentUser.USER.get();
      CurrentUser.USER.set(user);
      Tenant.TENANT.set(request.getHeader("X-Tenant"));
      WebAsyncUtils.getAsyncManager(request).registerCallableInterceptor(KEY, new Carrier());
      try {
        chain.doFilter(new CallerAwareRequest(request), response);
      } finally {
        Tenant.TENANT.remove();
        CurrentUser.USER.set(previous);
        if (previous == null) {
          CurrentUser.USER.remove();
        }
      }
    }
  }

  /** As Spring Security's SecurityContextCallableProcessingInterceptor. */
  static final class Carrier implements CallableProcessingInterceptor {
    private volatile String captured;

    @Override
    public <T> void beforeConcurrentHandling(NativeWebRequest request, Callable<T> task) {
      captured = CurrentUser.get();
    }

    @Override
    public <T> void preProcess(NativeWebRequest request, Callable<T> task) {
      CurrentUser.USER.set(captured);
    }

    @Override
    public <T> void postProcess(NativeWebRequest request, Callable<T> task, Object result) {
      CurrentUser.USER.remove();
    }
  }

  /** As Spring Security's SecurityContextHolderAwareRequestWrapper. */
  static final class CallerAwareRequest extends HttpServletRequestWrapper {
    CallerAwareRequest(HttpServletRequest request) {
      super(request);
    }

    @Override
    public Principal getUserPrincipal() {
      String user = CurrentUser.get();
      return user == null ? null : () -> user;
    }

    @Override
    public String getRemoteUser() {
      return CurrentUser.get();
    }
  }

  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(Audited.class)
  static class ThreadContextApplication {
    /** Where Spring Security's filter chain is: order -100, before the starter's filter. */
    @Bean
    FilterRegistrationBean<CallerFilter> callerFilter() {
      FilterRegistrationBean<CallerFilter> registration =
          new FilterRegistrationBean<>(new CallerFilter());
      registration.setOrder(-100);
      return registration;
    }

    /** Carries the tenant to the threads of Spring Boot's task executor, Spring MVC's async one. */
    @Bean
    TaskDecorator tenantDecorator() {
      return task -> {
        String tenant = Tenant.TENANT.get();
        return () -> {
          Tenant.TENANT.set(tenant);
          try {
            task.run();
          } finally {
            Tenant.TENANT.remove();
          }
        };
      };
    }
  }

  @RestController
  static class Audited {
    static final AtomicInteger entered = new AtomicInteger();
    static final Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();
    static final Map<String, List<String>> reads = new ConcurrentHashMap<>();
    static final HeldExecutor HELD = new HeldExecutor();

    /** Sends, waits for the first answer (20 s at most), then reads its caller ({@code how}). */
    @PostMapping("/probeR/audited/{how}")
    @IdempotentEndpoint
    public Callable<ResponseEntity<Map<String, Object>>> audited(
        @PathVariable("how") String how,
        @RequestHeader("Idempotency-Key") String key,
        HttpServletRequest request) {
      entered.incrementAndGet();
      CountDownLatch answered = HELD.firstAnswered;
      return () -> {
        int n = send(key);
        answered.await(20, TimeUnit.SECONDS);
        String user = caller(key, how, request);
        return ResponseEntity.status(201).body(Map.of("send", n, "user", user));
      };
    }

    /** The same work, unguarded: Spring MVC alone. */
    @PostMapping("/probeR/unguarded/{how}")
    public Callable<ResponseEntity<Map<String, Object>>> unguarded(
        @PathVariable("how") String how, HttpServletRequest request) {
      return () ->
          ResponseEntity.status(201).body(Map.of("user", caller("unguarded", how, request)));
    }

    private static String caller(String key, String how, HttpServletRequest request) {
      try {
        String user;
        if (how.equals("holder")) {
          user = CurrentUser.require();
        } else if (how.equals("tenant")) {
          user = Tenant.require();
        } else if (how.equals("principal")) {
          Principal principal = request.getUserPrincipal();
          if (principal == null) {
            throw new IllegalStateException(
                "no principal on thread " + Thread.currentThread().getName());
          }
          user = principal.getName();
        } else {
          user = "not read";
        }
        read(key, "read " + user);
        return user;
      } catch (RuntimeException e) {
        read(key, "failed: " + e.getMessage());
        throw e;
      }
    }

    private static void read(String key, String outcome) {
      reads.computeIfAbsent(key, k -> new CopyOnWriteArrayList<>()).add(outcome);
    }

    static int sendsOf(String key) {
      AtomicInteger n = sends.get(key);
      return n == null ? 0 : n.get();
    }

    private static int send(String key) {
      return sends.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
    }

    /** Not guarded: holds the async executor's only thread until the test releases it. */
    @PostMapping("/probeR/block")
    public Callable<String> block() {
      return HELD.block();
    }
  }
}
