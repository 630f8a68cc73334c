package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.http.HttpResponse;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.core.task.TaskDecorator;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.context.request.RequestContextHolder;
import org.springframework.web.context.request.ServletRequestAttributes;

/**
 * probeZ, of fixpost (merge 8637a0b): the application's {@code TaskDecorator} wraps the starter's
 * tasks (the worker that runs a shielded Callable, the taken-over run). Here the decorator's
 * wrapper fails before it runs its task, once, on the starter's thread only (a context it restores
 * that cannot be restored there: it throws before calling the task). Then the work never runs,
 * nothing is sent, and the key should be released (or the work run elsewhere), so the client's
 * retry sends once. One application on a real Redis, a one-thread async executor, a 1 s async
 * timeout.
 *
 * <p>Was an open finding (probeZ, on 493e7d6; low-medium, other: no second send, but the send was
 * held back and a thread held for good), both rows, Boot 3.5 and 4.0: the starter completed the
 * work's result inside the task it hands the decorator (UninterruptedWork: the worker's {@code
 * result}, the taken-over run's {@code takenOverResult}), so a wrapper that throws before running
 * it left nothing to end the call. Seen: "sends of the key (first: 409 request-in-progress; retry:
 * 409 'a request with this Idempotency-Key is still being processed'; decorator failed on:
 * idempotent-endpoint-1 [on time] / idempotent-endpoint-taken-over-1 [taken over]; sends: 0)
 * expected: 1 but was: 0" after 20 s of retries; on time Spring MVC's task thread waited for the
 * worker's result for good. Fixed (fixscope): when the decorated task ends without having run the
 * work, the call ends as that failure (nothing sent: the key is released through the exception
 * resolvers, the request answered with the error), and the work never runs after that.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class MvcFailingTaskDecoratorProbeTest extends MvcProbeApplication {

  MvcFailingTaskDecoratorProbeTest() {
    super(
        FailingDecoratorApplication.class,
        "spring.mvc.async.request-timeout=1s",
        "spring.task.execution.pool.core-size=1",
        "spring.task.execution.pool.max-size=1");
  }

  @Override
  public int runs() {
    return Decorated.entered.get();
  }

  /** Taken over: queued behind a held executor at the timeout, the starter runs it. */
  @Test
  @Order(1)
  void aDecoratorThatFailsOnTheTakenOverRunLeavesTheKeyFree() throws Exception {
    sendsOnce("run-fails", true, true);
  }

  /**
   * Taken over, the decorator's wrapper returning without running its task (fixscope): nothing ran,
   * so the call ends as a failure too.
   */
  @Test
  @Order(2)
  void aDecoratorThatSkipsTheTakenOverRunLeavesTheKeyFree() throws Exception {
    sendsOnce("run-skipped", true, true);
  }

  /** On time, the worker's wrapper returning without running its task (fixscope). */
  @Test
  @Order(3)
  void aDecoratorThatSkipsTheStartersWorkerLeavesTheKeyFree() throws Exception {
    sendsOnce("run-skipped", false, false);
  }

  /**
   * On time: the starter's worker that runs the shielded work is decorated; its wrapper fails. Last
   * in the class: if the worker never completes, Spring MVC's only task thread stays waiting.
   */
  @Test
  @Order(4)
  void aDecoratorThatFailsOnTheStartersWorkerLeavesTheKeyFree() throws Exception {
    sendsOnce("run-fails", false, false);
  }

  private void sendsOnce(String mode, boolean queued, boolean held) throws Exception {
    String key = EndpointClient.newKey();
    String path = "/probeZ/decorated/" + mode;
    HttpResponse<byte[]> first =
        Decorated.HELD.firstAnswer(
            port(),
            "/probeZ/decorated-block",
            queued,
            held,
            () -> post(path, key, "{}"),
            () -> Decorated.sendsOf(key) == 1 || Failing.failedOn.containsKey(key));
    String firstSeen = first.statusCode() + " " + EndpointClient.text(first);
    HttpResponse<byte[]> retry = MvcProbes.retryUntilAnswered(this, path, key);
    String facts =
        "first: "
            + firstSeen
            + "; retry: "
            + MvcProbes.replayed(retry)
            + "; decorator failed on: "
            + Failing.failedOn.get(key)
            + "; sends: "
            + Decorated.sendsOf(key);
    assertThat(Failing.failedOn.get(key)).as("the decorator failed (%s)", facts).isNotNull();
    assertThat(Decorated.sendsOf(key)).as("sends of the key (%s)", facts).isEqualTo(1);
    assertThat(retry.statusCode()).as("the retry (%s)", facts).isEqualTo(201);
    assertThat(EndpointClient.text(retry)).as("the retry (%s)", facts).isEqualTo("sent-1");
  }

  /**
   * Wraps each task; for the probe's paths, the wrapper throws before running its task ({@code
   * run-fails}), or returns without running it ({@code run-skipped}), on the starter's thread
   * ({@code idempotent-endpoint-*}), once per key.
   */
  static final class Failing implements TaskDecorator {
    static final Map<String, String> failedOn = new ConcurrentHashMap<>();
    private static final Set<String> failed = ConcurrentHashMap.newKeySet();

    @Override
    public Runnable decorate(Runnable runnable) {
      String key = null;
      boolean skips = false;
      if (RequestContextHolder.getRequestAttributes() instanceof ServletRequestAttributes web) {
        try {
          String uri = web.getRequest().getRequestURI();
          if (uri.startsWith("/probeZ/decorated/run-fails")
              || uri.startsWith("/probeZ/decorated/run-skipped")) {
            key = web.getRequest().getHeader("Idempotency-Key");
            skips = uri.startsWith("/probeZ/decorated/run-skipped");
          }
        } catch (RuntimeException requestGone) {
          key = null;
        }
      }
      String failingKey = key;
      boolean skipping = skips;
      return () -> {
        String thread = Thread.currentThread().getName();
        if (failingKey != null
            && thread.startsWith("idempotent-endpoint-")
            && failed.add(failingKey)) {
          failedOn.put(failingKey, thread);
          if (skipping) {
            return; // its context cannot be restored: the task is left out, silently
          }
          throw new IllegalStateException("probeZ: the decorator cannot restore its context");
        }
        runnable.run();
      };
    }
  }

  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(Decorated.class)
  static class FailingDecoratorApplication {
    @Bean
    Failing failingTaskDecorator() {
      return new Failing();
    }
  }

  @RestController
  static class Decorated {
    static final AtomicInteger entered = new AtomicInteger();
    static final Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();
    static final HeldExecutor HELD = new HeldExecutor();

    @PostMapping({"/probeZ/decorated/run-fails", "/probeZ/decorated/run-skipped"})
    @IdempotentEndpoint
    public Callable<ResponseEntity<String>> work(@RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      CountDownLatch answered = HELD.firstAnswered;
      return () -> {
        int n = sends.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
        answered.await(20, TimeUnit.SECONDS);
        return ResponseEntity.status(201).body("sent-" + n);
      };
    }

    @PostMapping("/probeZ/decorated-block")
    public Callable<String> block() {
      return Decorated.HELD.block();
    }

    static int sendsOf(String key) {
      AtomicInteger n = sends.get(key);
      return n == null ? 0 : n.get();
    }
  }
}
