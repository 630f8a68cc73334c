package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.http.HttpResponse;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.http.ResponseEntity;
import org.springframework.stereotype.Component;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.context.annotation.RequestScope;
import org.springframework.web.context.request.RequestAttributes;
import org.springframework.web.context.request.RequestContextHolder;

/**
 * probeZ, of fixended (merge deec476) and the work that outlives its request: work that sent, then
 * reads what the request's thread gave it through Spring's {@code RequestContextHolder} rather than
 * the request itself: a {@code @RequestScope} bean (an audit context the handler filled: the
 * caller, for the receipt), or a request attribute read with {@code
 * RequestContextHolder.currentRequestAttributes().getAttribute(name, SCOPE_REQUEST)}. On time,
 * Spring MVC's task thread has request attributes of its own ({@code FrameworkServlet}'s binding
 * interceptor), active while the work runs. Begun on time and detached at the timeout ({@code
 * held}), or queued behind a held executor and taken over ({@code queued}). SPEC 1: the work sends
 * once, and the retry is its replay (201, with the caller the work read). One application on a real
 * Redis, a one-thread async executor, a 1 s async timeout.
 */
class MvcRequestScopeAfterTheEndProbeTest extends MvcProbeApplication {

  MvcRequestScopeAfterTheEndProbeTest() {
    super(
        ScopeApplication.class,
        "spring.mvc.async.request-timeout=1s",
        "spring.task.execution.pool.core-size=1",
        "spring.task.execution.pool.max-size=1");
  }

  @Override
  public int runs() {
    return Scoped.entered.get();
  }

  /**
   * On time, and begun on time then detached at the timeout: the starter's worker runs the work
   * with the request attributes of Spring MVC's task thread, active, over the starter's request,
   * which answers from its copy once the request ended. Pass on Boot 3.5 and 4.0.
   */
  @ParameterizedTest(name = "{0}, queued={1}, held={2}")
  @CsvSource({
    "scoped-bean,false,false",
    "scoped-bean,false,true",
    "holder-attribute,false,false",
    "holder-attribute,false,true"
  })
  void workThatReadsItsRequestScopeAfterTheSendSendsOnce(String what, boolean queued, boolean held)
      throws Exception {
    sendsOnce(what, queued, held);
  }

  /**
   * Taken over: the work queued behind a busy executor at the timeout runs on the starter's thread.
   * Was an open finding (probeZ, on 493e7d6; medium: a second send, SPEC 1): the starter bound the
   * request attributes DetachedWork.detached captured on the request's thread when the handler
   * returned, which the end of that dispatch completed ({@code FrameworkServlet} calls {@code
   * requestCompleted()}), so every request-scope read failed there after the send
   * ("ScopeNotActiveException: ... Scope 'request' is not active for the current thread", "Cannot
   * ask for request attribute - request is not active anymore!"), the key was released and the
   * retry sent again: "sends: 2" on Boot 3.5 and 4.0. Fixed (fixscope): the taken-over run binds
   * request attributes of its own over the starter's request (its copy once the request ended), as
   * {@code FrameworkServlet}'s binding interceptor does for Spring MVC's task thread; the handler's
   * {@code @RequestScope} bean is the same instance (it answers the caller the handler set).
   */
  @ParameterizedTest(name = "{0}, queued={1}, held={2}")
  @CsvSource({"scoped-bean,true,true", "holder-attribute,true,true"})
  void takenOverWorkThatReadsItsRequestScopeAfterTheSendSendsOnce(
      String what, boolean queued, boolean held) throws Exception {
    sendsOnce(what, queued, held);
  }

  private void sendsOnce(String what, boolean queued, boolean held) throws Exception {
    String key = EndpointClient.newKey();
    String path = "/probeZ/scope/" + what;
    HttpResponse<byte[]> first =
        Scoped.HELD.firstAnswer(
            port(),
            "/probeZ/scope-block",
            queued,
            held,
            () -> post(path, key, "{}", "X-Caller", "alice"),
            () -> Scoped.reads.containsKey(key));
    HttpResponse<byte[]> retry = retryUntilAnswered(path, key);
    if (retry.statusCode() >= 500) {
      retry = retryUntilAnswered(path, key); // the client retries a 5xx too
    }
    String facts =
        "first: "
            + first.statusCode()
            + " "
            + EndpointClient.text(first)
            + "; retry: "
            + MvcProbes.replayed(retry)
            + "; the work's reads: "
            + Scoped.reads.get(key)
            + "; sends: "
            + Scoped.sendsOf(key);
    assertThat(Scoped.sendsOf(key)).as("sends of the key (%s)", facts).isEqualTo(1);
    assertThat(retry.statusCode()).as("the retry (%s)", facts).isEqualTo(201);
    assertThat(EndpointClient.text(retry)).as("the retry (%s)", facts).isEqualTo("sent-1 alice");
  }

  /** The client's retry, as its first request (with its caller), while 409 or 503, for 20 s. */
  private HttpResponse<byte[]> retryUntilAnswered(String path, String key) throws Exception {
    HttpResponse<byte[]> retry;
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    do {
      retry = post(path, key, "{}", "X-Caller", "alice");
    } while ((retry.statusCode() == 409 || retry.statusCode() == 503)
        && System.nanoTime() < deadline);
    return retry;
  }

  /** What the handler knows of its caller, for the work's receipt: one per request. */
  @Component
  @RequestScope
  public static class AuditContext {
    private volatile String caller;

    public String caller() {
      return caller;
    }

    public void caller(String caller) {
      this.caller = caller;
    }
  }

  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import({Scoped.class, AuditContext.class})
  static class ScopeApplication {}

  @RestController
  static class Scoped {
    static final AtomicInteger entered = new AtomicInteger();
    static final Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();
    static final Map<String, List<String>> reads = new ConcurrentHashMap<>();
    static final HeldExecutor HELD = new HeldExecutor();

    private final AuditContext audit;

    Scoped(AuditContext audit) {
      this.audit = audit;
    }

    /**
     * Notes the caller (in the request-scoped audit context, and as a request attribute), then its
     * work sends, waits (held) until the client got the first answer, and reads the caller back to
     * answer.
     */
    @PostMapping("/probeZ/scope/{what}")
    @IdempotentEndpoint
    public Callable<ResponseEntity<String>> work(
        @PathVariable("what") String what,
        @RequestHeader("Idempotency-Key") String key,
        @RequestHeader("X-Caller") String caller) {
      entered.incrementAndGet();
      audit.caller(caller);
      RequestContextHolder.currentRequestAttributes()
          .setAttribute("probeZ.caller", caller, RequestAttributes.SCOPE_REQUEST);
      CountDownLatch answered = HELD.firstAnswered;
      return () -> {
        int n = sends.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
        answered.await(20, TimeUnit.SECONDS);
        try {
          String read =
              what.equals("scoped-bean")
                  ? audit.caller()
                  : (String)
                      RequestContextHolder.currentRequestAttributes()
                          .getAttribute("probeZ.caller", RequestAttributes.SCOPE_REQUEST);
          reads.computeIfAbsent(key, k -> new CopyOnWriteArrayList<>()).add("read " + read);
          return ResponseEntity.status(201).body("sent-" + n + " " + read);
        } catch (RuntimeException e) {
          reads.computeIfAbsent(key, k -> new CopyOnWriteArrayList<>()).add("failed: " + e);
          throw e;
        }
      };
    }

    @PostMapping("/probeZ/scope-block")
    public Callable<String> block() {
      return HELD.block();
    }

    static int sendsOf(String key) {
      AtomicInteger n = sends.get(key);
      return n == null ? 0 : n.get();
    }
  }
}
