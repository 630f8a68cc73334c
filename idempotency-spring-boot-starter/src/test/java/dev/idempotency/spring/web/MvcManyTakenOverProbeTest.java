package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.http.ResponseEntity;
import org.springframework.scheduling.concurrent.ThreadPoolTaskExecutor;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.context.request.async.WebAsyncTask;

/**
 * Probe (probeM) of fixqueue (85e251d): more work taken over at once than the starter's pool has
 * threads ({@code UninterruptedWork.TAKEN_OVER_THREADS}, 32), so that the rest runs on the thread
 * taking it over, Tomcat's thread handling the request's timeout. The work is a {@code
 * WebAsyncTask} on its own executor (one thread, held by the test, a queue), queued there, not in
 * Spring MVC's. One application on a real Redis (Spring Data Redis's Lettuce connection), {@code
 * spring.mvc.async.request-timeout=1s}.
 */
@ExtendWith(OutputCaptureExtension.class)
class MvcManyTakenOverProbeTest extends MvcProbeApplication {

  private static final int REQUESTS = UninterruptedWork.TAKEN_OVER_THREADS + 8;

  private static final String PATH = "/probeM/many/task";

  MvcManyTakenOverProbeTest() {
    super(ManyApplication.class, "spring.mvc.async.request-timeout=1s");
  }

  /**
   * Runs before {@link MvcProbeApplication}'s own {@code @AfterAll}, which closes the application.
   */
  @AfterAll
  void releaseWork() {
    ManyTasks.gate.countDown();
    ManyTasks.release.countDown();
    ManyTasks.OWN.shutdown();
  }

  @Override
  public int runs() {
    return ManyTasks.entered.get();
  }

  /** What one run of {@link #takeOverMoreThanThePool} saw. */
  private record Seen(
      List<String> keys,
      int begunWhileHeld,
      int answeredWhileHeld,
      List<Integer> repeatsWhileHeld,
      List<String> firstAnswers,
      String text) {}

  /**
   * 40 guarded tasks queued at once on their own executor, its thread held, each sending then
   * holding its send until the test opens the gate: at their 1 s timeouts all 40 are taken over, 32
   * on the starter's pool and 8 on Tomcat's threads handling their timeouts. Then the own
   * executor's thread is freed while the gate is still closed (Spring MVC's tasks of the work taken
   * over begin, and are refused), then the gate opens.
   */
  private Seen takeOverMoreThanThePool(String path) throws Exception {
    ManyTasks.started.clear();
    List<String> keys = new ArrayList<>();
    for (int i = 0; i < REQUESTS; i++) {
      keys.add(EndpointClient.newKey());
    }
    CountDownLatch gate = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    ManyTasks.gate = gate;
    ManyTasks.release = release;
    CountDownLatch ownStarted = new CountDownLatch(1);
    ManyTasks.OWN.execute(() -> MvcRejectedWorkProbeTest.hold(ownStarted, release));
    assertThat(ownStarted.await(30, TimeUnit.SECONDS)).isTrue();
    List<CompletableFuture<HttpResponse<byte[]>>> first = new ArrayList<>();
    int begunWhileHeld;
    int answeredWhileHeld = 0;
    List<Integer> repeatsWhileHeld = new ArrayList<>();
    try {
      for (String key : keys) {
        first.add(MvcProbes.sendAsync(port(), path, key));
      }
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (ManyTasks.started.size() < REQUESTS && System.nanoTime() < deadline) {
        Thread.sleep(20);
      }
      begunWhileHeld = ManyTasks.started.size();
      // a repeat of a key whose work runs on the pool, and of one whose work runs on Tomcat's
      for (String key : keys) {
        String thread = ManyTasks.started.get(key);
        if (thread != null
            && (repeatsWhileHeld.isEmpty() && thread.startsWith("idempotent-endpoint-taken-over")
                || repeatsWhileHeld.size() == 1 && !thread.startsWith("idempotent-endpoint"))) {
          repeatsWhileHeld.add(post(path, key, "{}").statusCode());
        }
      }
      // the own executor's thread is freed: Spring MVC's tasks of the taken-over work begin
      release.countDown();
      long quiet = System.nanoTime() + TimeUnit.SECONDS.toNanos(3);
      while (System.nanoTime() < quiet) {
        Thread.sleep(50);
      }
      for (CompletableFuture<HttpResponse<byte[]>> answer : first) {
        if (answer.isDone()) {
          answeredWhileHeld++;
        }
      }
    } finally {
      gate.countDown();
      release.countDown();
    }
    Map<String, Integer> threads = new TreeMap<>();
    ManyTasks.started
        .values()
        .forEach(t -> threads.merge(t.replaceAll("-?\\d+$", ""), 1, Integer::sum));
    List<String> firstAnswers = new ArrayList<>();
    for (CompletableFuture<HttpResponse<byte[]>> answer : first) {
      firstAnswers.add(MvcProbes.answerOf(answer).replaceAll(" \\{.*", ""));
    }
    String text =
        String.format(
            "works begun while held %d of %d, on %s; clients answered while held %d; repeats while"
                + " held %s; first answers %s",
            begunWhileHeld, REQUESTS, threads, answeredWhileHeld, repeatsWhileHeld, firstAnswers);
    return new Seen(keys, begunWhileHeld, answeredWhileHeld, repeatsWhileHeld, firstAnswers, text);
  }

  /**
   * SPEC 1 over the run: every taken-over work began while the others were held (no timeout waited
   * for another's work), a repeat of a key meanwhile got 409 and never sent, each key was sent once
   * and its retry replays the stored 201. Passes on Boot 3.5 (9.6 s) and 4.0 (15.1 s), commit
   * feb9e77: 8 of the 40 works ran on Tomcat's threads, 32 on the pool; tagged extended.
   */
  @Test
  @Tag("extended")
  void moreTakenOverWorkThanThePoolHasThreadsSendsOncePerKey() throws Exception {
    Seen seen = takeOverMoreThanThePool(PATH);
    assertThat(seen.begunWhileHeld())
        .as("every taken-over work began: " + seen.text())
        .isEqualTo(REQUESTS);
    assertThat(seen.repeatsWhileHeld())
        .as("repeats while the work runs: " + seen.text())
        .containsOnly(409);
    for (String key : seen.keys()) {
      HttpResponse<byte[]> last = MvcProbes.retryWhileInProgress(this, PATH, key);
      assertThat(MvcProbes.replayed(last))
          .as("the retry of %s: %s", key, seen.text())
          .isEqualTo("201 replayed=true {\"send\":1}");
    }
    for (String key : seen.keys()) {
      assertThat(ManyTasks.sendsOf(key)).as("sends of %s: %s", key, seen.text()).isEqualTo(1);
    }
  }

  /**
   * Work taken over on the thread handling its request's timeout (the starter's pool full) holds
   * that timeout's handling until the work ends, since the starter's timeout handler runs first.
   * Spring MVC's own timeout handler, which cancels its task, has not run yet, so once the
   * executor's thread is free Spring MVC's task of the taken-over work begins, is refused ({@code
   * CancellationException: the request timed out before its work began}) and set as the request's
   * async result, dispatched once the timeout's handling returns (the container holds the dispatch
   * until then; the timeout's 409, written meanwhile, cannot end the request). The client still
   * gets the documented 409, and the container logs nothing for it ({@code
   * AsyncTimeouts#answerTakenOverTask}). Was an open finding: failed on Boot 3.5, commit feb9e77
   * and again at ad1148a (11.7 s): "first answers [409, 500, ..., 500, ...]" (8 x 500), Tomcat
   * logging "Servlet.service() for servlet [dispatcherServlet] threw exception" at ERROR twice per
   * such request. Boot 4.0 at ad1148a answered all 409 only because the timeout's 409 had gone out
   * already when the dispatch failed: the same ERROR logs, then "Ignoring exception, response
   * committed already". Spring MVC's WebAsyncManager and CallableInterceptorChain are the same in
   * 6.2.12 and 7.0.8. The key is kept either way (the work is detached when taken over), as the
   * extended test above shows.
   */
  @Test
  @Tag("extended")
  void clientsOfWorkTakenOverOnTheTimeoutThreadGet409(CapturedOutput output) throws Exception {
    Seen seen = takeOverMoreThanThePool(PATH);
    assertThat(seen.firstAnswers()).as("first answers: " + seen.text()).containsOnly("409");
    assertThat(output.getAll())
        .as("the container's log of a failed dispatch: " + seen.text())
        .doesNotContain("Servlet.service() for servlet")
        .doesNotContain("the request timed out before its work began");
  }

  /**
   * probeC, of manytaken (35db842c): the same race with a {@code WebAsyncTask} that has its own
   * {@code onTimeout} callback (a 202 for the client, never stored). Whatever each first client
   * gets (the task's 202, or the starter's 409), never a 500, each key is sent once, a repeat while
   * the work runs gets 409, and each retry after the work ended replays the work's 201. Tagged
   * extended (about as long as the two tests above).
   */
  @Test
  @Tag("extended")
  void workWithItsOwnOnTimeoutTakenOverOnTheTimeoutThreadSendsOncePerKey() throws Exception {
    Seen seen = takeOverMoreThanThePool(PATH + "-on-timeout");
    assertThat(seen.firstAnswers())
        .as("first answers: " + seen.text())
        .noneMatch(answer -> answer.startsWith("5"));
    assertThat(seen.repeatsWhileHeld())
        .as("repeats while the work runs: " + seen.text())
        .containsOnly(409);
    for (String key : seen.keys()) {
      HttpResponse<byte[]> last = MvcProbes.retryWhileInProgress(this, PATH + "-on-timeout", key);
      assertThat(MvcProbes.replayed(last))
          .as("the retry of %s: %s", key, seen.text())
          .isEqualTo("201 replayed=true {\"send\":1}");
    }
    for (String key : seen.keys()) {
      assertThat(ManyTasks.sendsOf(key)).as("sends of %s: %s", key, seen.text()).isEqualTo(1);
    }
  }

  /** Not through the common pool (one thread on two cores): every request in flight at once. */
  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ManyTasks.class)
  static class ManyApplication {}

  @RestController
  static class ManyTasks {
    static final AtomicInteger entered = new AtomicInteger();
    static final Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();
    static final Map<String, String> started = new ConcurrentHashMap<>();
    static volatile CountDownLatch gate = new CountDownLatch(1);
    static volatile CountDownLatch release = new CountDownLatch(1);

    /** The tasks' own executor: one thread, a queue. Not a bean (Boot's executor stays). */
    static final ThreadPoolTaskExecutor OWN = ownExecutor();

    private static ThreadPoolTaskExecutor ownExecutor() {
      ThreadPoolTaskExecutor executor = new ThreadPoolTaskExecutor();
      executor.setCorePoolSize(1);
      executor.setMaxPoolSize(1);
      executor.setQueueCapacity(1000);
      executor.setThreadNamePrefix("probeM-many-own-");
      executor.setDaemon(true);
      executor.initialize();
      return executor;
    }

    static int sendsOf(String key) {
      AtomicInteger n = sends.get(key);
      return n == null ? 0 : n.get();
    }

    /** Sends in its task on its own executor, then holds until the test opens the gate. */
    @PostMapping("/probeM/many/task")
    @IdempotentEndpoint
    public WebAsyncTask<ResponseEntity<Map<String, Object>>> task(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      CountDownLatch held = gate;
      return new WebAsyncTask<>(
          1_000L,
          OWN,
          () -> {
            int n = sends.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
            started.put(key, Thread.currentThread().getName());
            held.await(Duration.ofSeconds(30).toMillis(), TimeUnit.MILLISECONDS);
            return ResponseEntity.status(201).body(Map.of("send", n));
          });
    }

    /** The same, with the task's own {@code onTimeout} answer (probeC). */
    @PostMapping("/probeM/many/task-on-timeout")
    @IdempotentEndpoint
    public WebAsyncTask<ResponseEntity<Map<String, Object>>> taskOnTimeout(
        @RequestHeader("Idempotency-Key") String key) {
      WebAsyncTask<ResponseEntity<Map<String, Object>>> task = task(key);
      task.onTimeout(() -> ResponseEntity.status(202).body(Map.of("accepted", true)));
      return task;
    }
  }
}
