package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

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
import java.util.EnumSet;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.core.Ordered;
import org.springframework.test.util.ReflectionTestUtils;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.context.request.async.DeferredResult;
import org.springframework.web.context.request.async.WebAsyncManager;
import org.springframework.web.context.request.async.WebAsyncUtils;

/**
 * fixrace: the result of a detached {@code Callable} that Spring MVC still dispatches, because it
 * came while the container's timeout handling was under way: after the timeout's 409 went out to
 * the client, before that handling returned. Tomcat 11 (Boot 4.0) sends a response as soon as its
 * content length is written, so the 409 of {@code AsyncTimeouts.answer409} reaches the client
 * before the starter's {@code handleTimeout} returns its {@code RESPONSE_HANDLED} to Spring MVC and
 * before {@code AsyncContext.complete()}; a {@code Callable} that the client's 409 set going (a
 * retry's, or, here, the test's gate) returns in that window, and Spring MVC takes its result as
 * the request's async result and dispatches it (Tomcat allows a dispatch while it is timing out).
 * That dispatch then runs the result in Spring MVC as well as in the starter, which took it as the
 * detached call's late result: a later {@code DeferredResult} gets Spring MVC's result handler in
 * place of the starter's, and the starter never hears its answer.
 *
 * <p>The window is held open here, on Boot 3.5 and 4.0 alike, by a filter of the application's
 * ({@link HoldsTheTimeoutAnswer}): its response wrapper, the one the starter writes the 409 to,
 * opens the handler's gate once the 409 is written (as the client that got it would: Tomcat 11
 * sends it then) and then holds the timeout's thread until Spring MVC took the {@code Callable}'s
 * result and dispatched it; the async dispatch itself is held until the starter awaits the {@code
 * DeferredResult}, the order the failure needs. One application on a real Redis, {@code
 * spring.mvc.async.request-timeout=1s}.
 */
class MvcDetachedResultDispatchRaceProbeTest extends MvcProbeApplication {

  private static final String PATH = "/fixrace/detached/later-deferred-timeout-result";

  MvcDetachedResultDispatchRaceProbeTest() {
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
   * The row of MvcTakenOverEmitterShapesProbeTest ({@code
   * aDetachedCallablesLaterDeferredResultThatNothingSetsExpires[timeout-result]}) with its window
   * held open: a detached {@code Callable}'s later {@code DeferredResult} that nothing sets, with a
   * timeout result, expires into that timeout result, stored and replayed: {@code 200 timed-out}.
   *
   * <p>Was an open finding (fixrace; a replay the request did not produce, SPEC 1: no second or
   * lost send, but the stored answer is not the work's). Failed on Boot 3.5 and 4.0 at 76f2b4f3 in
   * about 25 s: "the retry: first answer 409 replayed=null {...request-in-progress...}, last 422
   * replayed=null {...response-not-stored..., "original-status":200}, the window: dispatched,
   * expected: 200 but was: 422". Spring MVC's dispatch of the {@code Callable}'s result set its own
   * result handler on the {@code DeferredResult} after the starter's; at the expiry its timeout
   * result went to Spring MVC (a closed response), and the starter, which heard nothing, recorded
   * the call as answered without its body. Under load on Boot 4.0 the row of
   * MvcTakenOverEmitterShapesProbeTest was seen failing so twice without the filter's hold. Now
   * that dispatch ends with the 409 ({@code AsyncTimeouts.answerDetachedOutcome}): the result is
   * the starter's alone.
   */
  @Test
  void aDetachedCallablesResultDispatchedDuringTheTimeoutIsTheStartersOnly() throws Exception {
    String key = EndpointClient.newKey();
    CountDownLatch gate = new CountDownLatch(1);
    Race.gate = gate;
    HttpResponse<byte[]> first;
    try {
      first = post(PATH, key, "{}");
    } finally {
      gate.countDown();
    }
    HttpResponse<byte[]> last = MvcProbes.retryUntilAnswered(this, PATH, key);
    String seen =
        "first answer "
            + MvcProbes.replayed(first)
            + ", last "
            + MvcProbes.replayed(last)
            + ", the window: "
            + HoldsTheTimeoutAnswer.staged.get(key);
    assertThat(first.statusCode()).as(seen).isEqualTo(409);
    // the race was staged: Spring MVC took the Callable's result during the timeout's handling
    assertThat(HoldsTheTimeoutAnswer.staged.get(key)).as(seen).isEqualTo("dispatched");
    assertThat(last.statusCode()).as("the retry: " + seen).isEqualTo(200);
    assertThat(EndpointClient.text(last)).as("the retry: " + seen).isEqualTo("timed-out");
  }

  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(Race.class)
  static class RaceApplication {
    @Bean
    FilterRegistrationBean<HoldsTheTimeoutAnswer> holdsTheTimeoutAnswer() {
      FilterRegistrationBean<HoldsTheTimeoutAnswer> registration =
          new FilterRegistrationBean<>(new HoldsTheTimeoutAnswer());
      registration.setOrder(Ordered.HIGHEST_PRECEDENCE);
      registration.setDispatcherTypes(EnumSet.of(DispatcherType.REQUEST, DispatcherType.ASYNC));
      return registration;
    }
  }

  @RestController
  static class Race {
    static final java.util.concurrent.atomic.AtomicInteger entered =
        new java.util.concurrent.atomic.AtomicInteger();
    static volatile CountDownLatch gate = new CountDownLatch(0);

    /** The later {@code DeferredResult} of each key, for the filter's hold of its dispatch. */
    static final Map<String, DeferredResult<String>> results = new ConcurrentHashMap<>();

    @PostMapping(PATH)
    @IdempotentEndpoint
    public Callable<DeferredResult<String>> laterDeferredTimeoutResult(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      CountDownLatch held = gate;
      return () -> {
        held.await(30, TimeUnit.SECONDS);
        DeferredResult<String> deferred = new DeferredResult<>(null, "timed-out");
        results.put(key, deferred);
        return deferred;
      };
    }
  }

  /**
   * Holds the window open, for the probe's path only. On the request's dispatch it wraps the
   * response: once the timeout's 409 is written (while the request is async) it opens the handler's
   * gate, as the client that got the 409 would, and the timeout's thread then waits (20 s at most)
   * until Spring MVC has taken an async result and dispatched it. On the async dispatch it waits
   * (20 s at most) until something awaits the later {@code DeferredResult} (the starter's result
   * handler is set), so that Spring MVC's comes after. What it saw, per key: {@code dispatched}, or
   * {@code no result} if the wait ran out.
   */
  static final class HoldsTheTimeoutAnswer implements Filter {
    static final Map<String, String> staged = new ConcurrentHashMap<>();

    @Override
    public void doFilter(ServletRequest request, ServletResponse response, FilterChain chain)
        throws IOException, ServletException {
      HttpServletRequest http = (HttpServletRequest) request;
      String key = http.getHeader("Idempotency-Key");
      if (!PATH.equals(http.getRequestURI()) || key == null) {
        chain.doFilter(request, response);
        return;
      }
      if (http.getDispatcherType() == DispatcherType.ASYNC) {
        DeferredResult<String> deferred = Race.results.get(key);
        if (deferred != null) {
          waitFor(() -> ReflectionTestUtils.getField(deferred, "resultHandler") != null);
        }
        chain.doFilter(request, response);
        return;
      }
      chain.doFilter(request, new SendsTheTimeoutAnswer(http, (HttpServletResponse) response, key));
    }

    private static boolean waitFor(BooleanSupplier condition) {
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
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

      /** The timeout's 409 was written: sent now, then the timeout's thread is held. */
      private void written() throws IOException {
        if (getStatus() != 409 || !request.isAsyncStarted() || staged.containsKey(key)) {
          return;
        }
        // the client that got it sets the work going (Tomcat 11 sends a response as soon as its
        // content length is written; Tomcat 10.1 later): opened here, on Boot 3.5 and 4.0 alike
        Race.gate.countDown();
        WebAsyncManager manager = WebAsyncUtils.getAsyncManager(request);
        boolean dispatched = waitFor(manager::hasConcurrentResult);
        synchronized (manager) {
          // Spring MVC dispatches in the same block that set the result: done by now
        }
        staged.put(key, dispatched ? "dispatched" : "no result");
      }
    }
  }
}
