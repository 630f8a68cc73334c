package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.testservers.Poll;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.net.http.HttpResponse;
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
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
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
import org.springframework.web.filter.OncePerRequestFilter;

/**
 * How the request's {@code CallableProcessingInterceptor}s run when the starter runs a guarded
 * {@code Callable} on its own threads ({@link TaskThreadContext}): as Spring MVC's {@code
 * CallableInterceptorChain} runs them, once on each thread that runs the task, never twice on one,
 * {@code preProcess} in order and {@code postProcess} in reverse; {@code beforeConcurrentHandling}
 * and {@code afterCompletion} once per request, Spring MVC's. On time, Spring MVC's task thread
 * (which waits) and the starter's worker each get them; taken over at a timeout (queued behind a
 * held one-thread executor), only the starter's thread, since Spring MVC's task never ran. Two
 * interceptors (A then B) registered by a filter, as Spring Security's is. One application on a
 * real Redis.
 */
class MvcCallableInterceptorsOnStarterThreadsTest extends MvcProbeApplication {

  MvcCallableInterceptorsOnStarterThreadsTest() {
    super(
        InterceptedApplication.class,
        "spring.mvc.async.request-timeout=1s",
        "spring.task.execution.pool.core-size=1",
        "spring.task.execution.pool.max-size=1");
  }

  @Override
  public int runs() {
    return Intercepted.entered.get();
  }

  @Test
  void onTimeEachThreadThatRunsTheTaskGetsEachInterceptorOnce() throws Exception {
    String key = EndpointClient.newKey();
    HttpResponse<byte[]> answer =
        Intercepted.HELD.firstAnswer(
            port(),
            "/interceptors/block",
            false,
            false,
            () -> post("/interceptors/work", key, "{}"),
            () -> Intercepted.sendsOf(key) == 1);
    assertThat(answer.statusCode()).as(EndpointClient.text(answer)).isEqualTo(201);
    List<String> events = eventsWhenCompleted(key);
    assertThat(events)
        .as("events")
        .containsExactly(
            "A.before@request",
            "B.before@request",
            "A.pre@mvc",
            "B.pre@mvc",
            "A.pre@starter",
            "B.pre@starter",
            "work@starter",
            "B.post@starter",
            "A.post@starter",
            "B.post@mvc",
            "A.post@mvc",
            "B.after@request",
            "A.after@request");
  }

  @Test
  void takenOverOnlyTheStartersThreadGetsThemOnce() throws Exception {
    String key = EndpointClient.newKey();
    HttpResponse<byte[]> first =
        Intercepted.HELD.firstAnswer(
            port(),
            "/interceptors/block",
            true,
            true,
            () -> post("/interceptors/work", key, "{}"),
            () -> Intercepted.sendsOf(key) == 1);
    assertThat(first.statusCode()).as(EndpointClient.text(first)).isEqualTo(409);
    List<String> events = eventsWhenCompleted(key);
    Poll.within(Duration.ofSeconds(30))
        .until(
            "the taken-over work's postProcess: " + events,
            () -> Intercepted.events(key).contains("A.post@taken-over"));
    // afterCompletion comes with the 409's end, before or while the work runs
    List<String> all = Intercepted.events(key);
    assertThat(all.stream().filter(e -> !e.contains(".after@")).toList())
        .as("events: %s", all)
        .containsExactly(
            "A.before@request",
            "B.before@request",
            "A.pre@taken-over",
            "B.pre@taken-over",
            "work@taken-over",
            "B.post@taken-over",
            "A.post@taken-over");
    assertThat(all.stream().filter(e -> e.contains(".after@")).toList())
        .as("events: %s", all)
        .containsExactly("B.after@request", "A.after@request");
    Poll.within(Duration.ofSeconds(30))
        .until("the replay", () -> post("/interceptors/work", key, "{}").statusCode() == 201);
    assertThat(Intercepted.sendsOf(key)).isEqualTo(1);
  }

  private static List<String> eventsWhenCompleted(String key) throws InterruptedException {
    Poll.within(Duration.ofSeconds(30))
        .until(
            "afterCompletion: " + Intercepted.events(key),
            () -> Intercepted.events(key).contains("A.after@request"));
    return Intercepted.events(key);
  }

  /** The kind of thread this is: the request's (a container's), Spring MVC's, or the starter's. */
  static String thread() {
    String name = Thread.currentThread().getName();
    if (name.startsWith("idempotent-endpoint-taken-over-")) {
      return "taken-over";
    }
    if (name.startsWith("idempotent-endpoint-")) {
      return "starter";
    }
    if (name.startsWith("task-")) {
      return "mvc"; // Spring Boot's applicationTaskExecutor, Spring MVC's
    }
    return "request";
  }

  /** Registers interceptors A then B on each request's async manager, as Spring Security does. */
  static final class RegisteringFilter extends OncePerRequestFilter {
    @Override
    protected void doFilterInternal(
        HttpServletRequest request, HttpServletResponse response, FilterChain chain)
        throws ServletException, IOException {
      String key = request.getHeader("Idempotency-Key");
      if (key != null) {
        WebAsyncUtils.getAsyncManager(request)
            .registerCallableInterceptor("probe.A", new Recording("A", key));
        WebAsyncUtils.getAsyncManager(request)
            .registerCallableInterceptor("probe.B", new Recording("B", key));
      }
      chain.doFilter(request, response);
    }
  }

  /** Records each of its calls, and on which kind of thread. */
  static final class Recording implements CallableProcessingInterceptor {
    private final String name;
    private final String key;

    Recording(String name, String key) {
      this.name = name;
      this.key = key;
    }

    private void record(String phase) {
      Intercepted.record(key, name + "." + phase + "@" + thread());
    }

    @Override
    public <T> void beforeConcurrentHandling(NativeWebRequest request, Callable<T> task) {
      record("before");
    }

    @Override
    public <T> void preProcess(NativeWebRequest request, Callable<T> task) {
      record("pre");
    }

    @Override
    public <T> void postProcess(NativeWebRequest request, Callable<T> task, Object result) {
      record("post");
    }

    @Override
    public <T> void afterCompletion(NativeWebRequest request, Callable<T> task) {
      record("after");
    }
  }

  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(Intercepted.class)
  static class InterceptedApplication {
    @Bean
    FilterRegistrationBean<RegisteringFilter> registeringFilter() {
      FilterRegistrationBean<RegisteringFilter> registration =
          new FilterRegistrationBean<>(new RegisteringFilter());
      registration.setOrder(-100);
      return registration;
    }
  }

  @RestController
  static class Intercepted {
    static final AtomicInteger entered = new AtomicInteger();
    static final Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();
    static final Map<String, List<String>> events = new ConcurrentHashMap<>();
    static final HeldExecutor HELD = new HeldExecutor();

    @PostMapping("/interceptors/work")
    @IdempotentEndpoint
    public Callable<ResponseEntity<String>> work(@RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      CountDownLatch answered = HELD.firstAnswered;
      return () -> {
        record(key, "work@" + thread());
        sends.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
        answered.await(20, TimeUnit.SECONDS);
        return ResponseEntity.status(201).body("sent");
      };
    }

    @PostMapping("/interceptors/block")
    public Callable<String> block() {
      return HELD.block();
    }

    static void record(String key, String event) {
      events.computeIfAbsent(key, k -> new CopyOnWriteArrayList<>()).add(event);
    }

    static List<String> events(String key) {
      return List.copyOf(events.getOrDefault(key, List.of()));
    }

    static int sendsOf(String key) {
      AtomicInteger n = sends.get(key);
      return n == null ? 0 : n.get();
    }
  }
}
