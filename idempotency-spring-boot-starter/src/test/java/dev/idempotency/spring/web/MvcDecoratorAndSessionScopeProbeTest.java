package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import jakarta.servlet.http.HttpServletRequest;
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
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.core.task.TaskDecorator;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.context.annotation.SessionScope;
import org.springframework.web.context.request.RequestContextHolder;
import org.springframework.web.context.request.ServletRequestAttributes;

/**
 * probeB, of fixscope (0bcae439): the run-once guard of a task the application's {@code
 * TaskDecorator} wraps ({@link UninterruptedWork}), and the request attributes of a taken-over run.
 * The decorator, on the starter's threads ({@code idempotent-endpoint-*}) and a key's first request
 * only: runs its task twice ({@code twice}); hands it to another thread that runs it only after the
 * wrapper returned ({@code later}); throws in {@code decorate()} itself, on Spring MVC's task
 * thread ({@code decorate-throws}, on time: where the starter decorates its worker). And taken-over
 * work that reads a {@code @SessionScope} bean after it sent: with a session the handler created on
 * the request's thread ({@code session-existing}), and with none before ({@code session-new}). SPEC
 * 1: the work sends at most once per key, a retry after a send is its replay, and work that never
 * ran leaves the key free. One application on a real Redis, a one-thread async executor, a 1 s
 * async timeout. Every row passes on Boot 3.5 and 4.0 (probeB, on ad1148aa): the guard holds.
 */
class MvcDecoratorAndSessionScopeProbeTest extends MvcProbeApplication {

  MvcDecoratorAndSessionScopeProbeTest() {
    super(
        DecoratedApplication.class,
        "spring.mvc.async.request-timeout=1s",
        "spring.task.execution.pool.core-size=1",
        "spring.task.execution.pool.max-size=1");
  }

  @Override
  public int runs() {
    return Work.entered.get();
  }

  /**
   * A decorator's wrapper that runs its task twice, or after it returned, or a {@code decorate()}
   * that throws: the work runs at most once, and the retry gets the one send's 201 "sent-1" (the
   * first request's own answer, or the retry's run if the first never ran the work).
   */
  @ParameterizedTest(name = "{0}, queued={1}")
  @CsvSource({"twice,false", "twice,true", "later,false", "later,true", "decorate-throws,false"})
  void aDecoratorsOddRunSendsOnce(String mode, boolean queued) throws Exception {
    sendsOnce("/probeB/decorated/" + mode, queued);
  }

  /**
   * Taken over (queued behind a held executor at the 1 s timeout), the work sends and then reads a
   * {@code @SessionScope} bean: its outcome must be kept (the retry 201 "sent-1"), never a failure
   * that releases the key after the send.
   */
  @ParameterizedTest(name = "{0}")
  @CsvSource({"session-existing", "session-new"})
  void takenOverWorkReadingASessionScopedBeanSendsOnce(String mode) throws Exception {
    sendsOnce("/probeB/scoped/" + mode, true);
  }

  private void sendsOnce(String path, boolean queued) throws Exception {
    String key = EndpointClient.newKey();
    HttpResponse<byte[]> first =
        Work.HELD.firstAnswer(
            port(),
            "/probeB/block",
            queued,
            queued,
            () -> post(path, key, "{}"),
            () -> Work.sendsOf(key) == 1 || Odd.seenOn.containsKey(key));
    String firstSeen = first.statusCode() + " " + EndpointClient.text(first);
    HttpResponse<byte[]> retry = MvcProbes.retryUntilAnswered(this, path, key);
    CountDownLatch late = Odd.lateRuns.get(key);
    boolean lateRan = late == null || late.await(20, TimeUnit.SECONDS);
    String facts =
        "first: "
            + firstSeen
            + "; retry: "
            + retry.statusCode()
            + " "
            + EndpointClient.text(retry)
            + "; decorator: "
            + Odd.seenOn.get(key)
            + "; late run ended: "
            + lateRan
            + "; session read on: "
            + Work.reads.get(key)
            + "; work failed: "
            + Work.failures.get(key)
            + "; sends: "
            + Work.sendsOf(key);
    assertThat(lateRan).as("the late run ended (%s)", facts).isTrue();
    if (path.startsWith("/probeB/decorated/")) {
      assertThat(Odd.seenOn.get(key)).as("the decorator's odd turn (%s)", facts).isNotNull();
    } else {
      assertThat(Work.reads.get(key)).as("the session read (%s)", facts).isNotNull();
    }
    assertThat(Work.sendsOf(key)).as("sends of the key (%s)", facts).isEqualTo(1);
    assertThat(retry.statusCode()).as("the retry (%s)", facts).isEqualTo(201);
    assertThat(EndpointClient.text(retry)).as("the retry (%s)", facts).isEqualTo("sent-1");
  }

  /** The application's task decorator: odd as the path's mode says, on a key's first request. */
  static final class Odd implements TaskDecorator {
    static final Map<String, String> seenOn = new ConcurrentHashMap<>();
    static final Map<String, CountDownLatch> lateRuns = new ConcurrentHashMap<>();
    private static final Set<String> first = ConcurrentHashMap.newKeySet();

    @Override
    public Runnable decorate(Runnable runnable) {
      String key = null;
      String mode = null;
      if (RequestContextHolder.getRequestAttributes() instanceof ServletRequestAttributes web) {
        try {
          String uri = web.getRequest().getRequestURI();
          if (uri.startsWith("/probeB/decorated/")) {
            key = web.getRequest().getHeader("Idempotency-Key");
            mode = uri.substring(uri.lastIndexOf('/') + 1);
          }
        } catch (RuntimeException requestGone) {
          key = null;
        }
      }
      String thread = Thread.currentThread().getName();
      if (key != null
          && "decorate-throws".equals(mode)
          && thread.startsWith("task-")
          && first.add(key)) {
        seenOn.put(key, "decorate@" + thread);
        throw new IllegalStateException("probeB: the decorator cannot decorate here");
      }
      String oddKey = key;
      String oddMode = mode;
      return () -> {
        String runner = Thread.currentThread().getName();
        if (oddKey == null
            || !runner.startsWith("idempotent-endpoint-")
            || oddMode.equals("decorate-throws")
            || !first.add(oddKey)) {
          runnable.run();
          return;
        }
        seenOn.put(oddKey, oddMode + "@" + runner);
        if (oddMode.equals("twice")) {
          runnable.run();
          runnable.run();
        } else if (oddMode.equals("later")) {
          CountDownLatch returned = new CountDownLatch(1);
          CountDownLatch ended = new CountDownLatch(1);
          lateRuns.put(oddKey, ended);
          Thread lateRunner =
              new Thread(
                  () -> {
                    try {
                      if (returned.await(20, TimeUnit.SECONDS)) {
                        Thread.sleep(200); // the wrapper's return handled by then, or not
                        runnable.run();
                      }
                    } catch (InterruptedException e) {
                      Thread.currentThread().interrupt();
                    } finally {
                      ended.countDown();
                    }
                  },
                  "probeB-late-runner");
          lateRunner.start();
          returned.countDown(); // counted down as the wrapper returns: the run comes after
        } else {
          runnable.run();
        }
      };
    }
  }

  /** A session's bean, read by the work after it sent. */
  public static class Visits {
    private final AtomicInteger count = new AtomicInteger();

    public int next() {
      return count.incrementAndGet();
    }
  }

  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(Work.class)
  static class DecoratedApplication {
    @Bean
    Odd oddTaskDecorator() {
      return new Odd();
    }

    @Bean
    @SessionScope
    Visits visits() {
      return new Visits();
    }
  }

  @RestController
  static class Work {
    static final AtomicInteger entered = new AtomicInteger();
    static final Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();
    static final Map<String, String> failures = new ConcurrentHashMap<>();
    static final Map<String, String> reads = new ConcurrentHashMap<>();
    static final HeldExecutor HELD = new HeldExecutor();
    private final Visits visits;

    Work(Visits visits) {
      this.visits = visits;
    }

    @PostMapping("/probeB/decorated/{mode}")
    @IdempotentEndpoint
    public Callable<ResponseEntity<String>> decorated(
        @PathVariable("mode") String mode, @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      CountDownLatch answered = HELD.firstAnswered;
      return () -> {
        int n = sends.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
        answered.await(20, TimeUnit.SECONDS);
        return ResponseEntity.status(201).body("sent-" + n);
      };
    }

    @PostMapping("/probeB/scoped/{mode}")
    @IdempotentEndpoint
    public Callable<ResponseEntity<String>> scoped(
        @PathVariable("mode") String mode,
        @RequestHeader("Idempotency-Key") String key,
        HttpServletRequest request) {
      entered.incrementAndGet();
      if (mode.equals("session-existing")) {
        request.getSession(true);
      }
      CountDownLatch answered = HELD.firstAnswered;
      return () -> {
        int n = sends.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
        answered.await(20, TimeUnit.SECONDS);
        try {
          visits.next(); // after the send: a session's count
          reads.putIfAbsent(key, Thread.currentThread().getName());
        } catch (RuntimeException e) {
          failures.put(key, e.toString());
          throw e;
        }
        return ResponseEntity.status(201).body("sent-" + n);
      };
    }

    @PostMapping("/probeB/block")
    public Callable<String> block() {
      return HELD.block();
    }

    static int sendsOf(String key) {
      AtomicInteger n = sends.get(key);
      return n == null ? 0 : n.get();
    }
  }
}
