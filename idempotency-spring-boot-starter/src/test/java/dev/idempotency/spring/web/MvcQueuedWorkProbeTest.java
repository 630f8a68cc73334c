package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.servlet.mvc.method.annotation.StreamingResponseBody;

/**
 * Probe (probeG) of c1bdd8f and 1bbf920: async work ({@code Callable}, {@code
 * StreamingResponseBody}) still queued in Spring MVC's async executor at a container async timeout
 * was abandoned and its key released, on the ground that "nothing was sent"; since fixqueue the
 * starter takes it over and runs it itself (docs/spring-boot.md, "HTTP endpoints" and "Streaming
 * responses"). One application on a real Redis (Spring Data Redis's Lettuce connection), {@code
 * spring.mvc.async.request-timeout=1s}, Spring MVC's async executor one thread ({@code
 * spring.task.execution.pool.core-size=1}), held by an unguarded request while the guarded one
 * waits in its queue.
 */
class MvcQueuedWorkProbeTest extends MvcProbeApplication {

  MvcQueuedWorkProbeTest() {
    super(
        QueuedWorkApplication.class,
        "spring.mvc.async.request-timeout=1s",
        "spring.task.execution.pool.core-size=1",
        "spring.task.execution.pool.max-size=1");
  }

  @Override
  public int runs() {
    return QueuedWork.entered.get();
  }

  /**
   * Was an open finding (medium-high, a second send; SPEC 1), fixed by fixqueue: the starter takes
   * work still queued at the timeout over and runs it itself, the key claimed. A handler that sends
   * in its method body and returns async work that only writes the answer (a {@code
   * StreamingResponseBody} writing the receipt, or a {@code Callable} formatting it), still queued
   * at the timeout. It was abandoned and its key released, so the retry ran the handler again and
   * sent a second time (both rows, Boot 3.5 and 4.0, commit c1701d4: "sends for the key (first
   * answer 503 ..., last 201 ...) expected: 1 but was: 2").
   */
  @ParameterizedTest
  @ValueSource(strings = {"/probeG/send-then-stream", "/probeG/send-then-callable"})
  void aHandlerThatSentBeforeItsWorkWasQueuedIsNotRunAgainByTheRetry(String path) throws Exception {
    String key = EndpointClient.newKey();
    HttpResponse<byte[]> timedOut = whileExecutorHeld(() -> post(path, key, "{}"));
    assertThat(QueuedWork.sendsOf(key)).as("the handler method sent before it returned").isOne();

    HttpResponse<byte[]> last = MvcProbes.retryUntilAnswered(this, path, key);
    assertThat(QueuedWork.sendsOf(key))
        .as(
            "sends for the key (first answer %s, last %s)",
            timedOut.statusCode() + " " + EndpointClient.text(timedOut), MvcProbes.replayed(last))
        .isEqualTo(1);
  }

  /**
   * The race a take-over (an abandonment, before fixqueue) opens: many guarded {@code Callable}
   * requests queued behind the executor's one thread, which is freed about when their 1 s timeouts
   * fire, so that some tasks begin as the timeout takes them over. Each key must send exactly once
   * in the end: its work ran once, on Spring MVC's executor or taken over by the starter (key kept
   * claimed, result stored and replayed). Passes on Boot 3.5 and 4.0 (no second send, no lost send
   * seen).
   */
  @Test
  void queuedCallablesFreedAtTheirTimeoutSendOncePerKey() throws Exception {
    int requests = 8;
    List<String> keys = new ArrayList<>();
    for (int i = 0; i < requests; i++) {
      keys.add(EndpointClient.newKey());
    }
    String path = "/probeG/callable";
    CountDownLatch release = new CountDownLatch(1);
    QueuedWork.release = release;
    QueuedWork.blockStarted = new CountDownLatch(1);
    CompletableFuture<HttpResponse<byte[]>> blocking =
        MvcProbes.sendAsync(port(), "/probeG/block", null);
    assertThat(QueuedWork.blockStarted.await(30, TimeUnit.SECONDS)).isTrue();
    List<CompletableFuture<HttpResponse<byte[]>>> first = new ArrayList<>();
    int enteredBefore = QueuedWork.callableEntered.get();
    try {
      for (String key : keys) {
        first.add(MvcProbes.sendAsync(port(), path, key));
      }
      // wait until every handler method ran (their work queued), then free the thread as the
      // first timeouts come (1 s after the first handler returned)
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (QueuedWork.callableEntered.get() - enteredBefore < requests
          && System.nanoTime() < deadline) {
        Thread.sleep(5);
      }
      Thread.sleep(950); // aims at the timeouts; the assertions hold whatever the timing
    } finally {
      release.countDown();
    }
    blocking.get(60, TimeUnit.SECONDS);
    List<String> firstAnswers = new ArrayList<>();
    for (CompletableFuture<HttpResponse<byte[]>> answer : first) {
      firstAnswers.add(MvcProbes.answerOf(answer));
    }
    for (String key : keys) {
      HttpResponse<byte[]> last = MvcProbes.retryUntilAnswered(this, path, key);
      assertThat(last.statusCode())
          .as("the retry of %s (first answers %s): %s", key, firstAnswers, MvcProbes.replayed(last))
          .isEqualTo(201);
    }
    for (String key : keys) {
      assertThat(QueuedWork.sendsOf(key))
          .as("sends of %s (first answers %s)", key, firstAnswers)
          .isEqualTo(1);
    }
  }

  /**
   * Was an open finding (low-medium, SPEC 13: a request timeout answers the client; no second
   * send), fixed by fixnested: a later stage never goes back to queued, and one still queued at the
   * timeout (Spring cancels it) is recorded as answered without its body (the retry gets 422). The
   * send happens in the guarded {@code Callable}'s work, whose result is async work again: a {@code
   * StreamingResponseBody} writing the receipt, or a {@code Callable}, which Spring MVC runs after
   * the first result's dispatch, on the same executor. The second stage is queued behind another
   * task (the first stage hands the executor a task that holds its only thread, so the order is
   * deterministic). Its shield sets the work back from STARTED to QUEUED ({@code
   * AsyncWork.workQueued}), so the timeout abandons it; by reading, {@code
   * AsyncTimeouts.handleTimeout} then answers with the first stage's result ({@code
   * AsyncWork.earlyResult}), which Spring MVC dispatches and queues again, and the decision being
   * taken once, each later timeout does the same: the client gets no answer while the executor is
   * busy (here 15 s, with a 1 s request timeout), then the work's answer. SPEC 1 holds: one send,
   * the retry a replay. Fails on both rows, Boot 3.5 and Boot 4.0, commit c1701d4: "the first
   * request answered at its timeout: sends while the executor was held 1, first answer (only once
   * the executor was freed) 201 {"send":1}, last 201 replayed=true {"send":1}". 16-17 s per row
   * before the fix.
   */
  @ParameterizedTest
  @ValueSource(strings = {"/probeG/callable-then-stream", "/probeG/callable-then-callable"})
  void aCallableThatReturnedMoreAsyncWorkIsAnsweredAtItsTimeoutAndSendsOnce(String path)
      throws Exception {
    String key = EndpointClient.newKey();
    CountDownLatch release = new CountDownLatch(1);
    QueuedWork.release = release;
    QueuedWork.blockStarted = new CountDownLatch(1);
    CompletableFuture<HttpResponse<byte[]>> first = MvcProbes.sendAsync(port(), path, key);
    boolean answeredWhileHeld;
    int sendsWhileHeld;
    try {
      // the second stage times out 1 s after it was queued: 15 s is ample
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
      while (!first.isDone() && System.nanoTime() < deadline) {
        Thread.sleep(20);
      }
      answeredWhileHeld = first.isDone();
      sendsWhileHeld = QueuedWork.sendsOf(key);
    } finally {
      release.countDown();
    }
    String firstAnswer = MvcProbes.answerOf(first);

    HttpResponse<byte[]> last = MvcProbes.retryUntilAnswered(this, path, key);
    String seen =
        String.format(
            "sends while the executor was held %d, first answer (%s) %s, last %s",
            sendsWhileHeld,
            answeredWhileHeld ? "while held" : "only once the executor was freed",
            firstAnswer,
            MvcProbes.replayed(last));
    assertThat(QueuedWork.sendsOf(key)).as("sends for the key: " + seen).isEqualTo(1);
    assertThat(answeredWhileHeld).as("the first request answered at its timeout: " + seen).isTrue();
    // the first stage sent, the second never ran (cancelled at the timeout): answered without
    // its body
    assertThat(last.statusCode()).as("the retry: " + seen).isEqualTo(422);
  }

  /**
   * Was an open finding (high: a second send, and a replay of an answer the request never produced;
   * SPEC 1), fixed by fixnested: a stage's result that is more async work is not the work's early
   * result; the Callable row is detached at the timeout (409) and the second stage's result stored
   * and replayed; the future row (Spring MVC cancels the future at the timeout) is recorded as
   * answered without its body (422). A {@code Callable} that returns at once more async work, which
   * sends and runs past the request timeout (1 s), nothing queued behind anything: a second {@code
   * Callable} (run on the executor's thread), or a {@code CompletableFuture} completed by a thread
   * of the application's. At the timeout the first stage's result (that second {@code Callable} or
   * future) is the work's "early result" ({@code AsyncWork.earlyResult}, set by the first stage's
   * {@code postProcess}), so the call is not detached. By reading: {@code TimeoutDecision.detach}
   * stores that result as the late answer ({@code detachWithEarlyResult}: rendered as a 200 with no
   * body) and the timeout answers with it, so Spring MVC dispatches it and runs the second stage
   * again. Fails on the Callable row, Boot 3.5 and Boot 4.0, commit c1701d4: "sends for the key
   * (while the first send was held 1; first answer 201 {"send":1}; last 200 replayed=true )
   * expected: 1 but was: 2": the client got no answer at its timeout (only once the held send
   * ended), the second run sent again once the first freed the executor's thread, and the retry is
   * a replay of an empty 200 (10 s per row). The future row passes on both lines (one send).
   */
  @ParameterizedTest
  @ValueSource(strings = {"/probeG/callable-then-slow", "/probeG/callable-then-future"})
  void aCallableWhoseSecondStageOutlivesTheTimeoutSendsOnce(String path) throws Exception {
    String key = EndpointClient.newKey();
    CountDownLatch slow = new CountDownLatch(1);
    QueuedWork.slowSend = slow;
    CompletableFuture<HttpResponse<byte[]>> first = MvcProbes.sendAsync(port(), path, key);
    int sendsWhileHeld;
    try {
      // a second send would come as the 1 s timeout is answered (Spring MVC dispatching the
      // first stage's result again): watch until 3 s after the first answer, 10 s at most
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      long answeredAt = 0;
      while (QueuedWork.sendsOf(key) < 2 && System.nanoTime() < deadline) {
        if (answeredAt == 0 && first.isDone()) {
          answeredAt = System.nanoTime();
        } else if (answeredAt != 0 && System.nanoTime() - answeredAt > 3_000_000_000L) {
          break;
        }
        Thread.sleep(20);
      }
      sendsWhileHeld = QueuedWork.sendsOf(key);
    } finally {
      slow.countDown();
    }
    String firstAnswer = MvcProbes.answerOf(first);
    HttpResponse<byte[]> last = MvcProbes.retryUntilAnswered(this, path, key);
    assertThat(QueuedWork.sendsOf(key))
        .as(
            "sends for the key (while the first send was held %d; first answer %s; last %s)",
            sendsWhileHeld, firstAnswer, MvcProbes.replayed(last))
        .isEqualTo(1);
    // a second Callable's late result is stored and replayed; a future's, which Spring MVC
    // cancels at the timeout, is lost: answered without its body
    assertThat(last.statusCode())
        .as("the retry (first answer %s): %s", firstAnswer, MvcProbes.replayed(last))
        .isEqualTo(path.endsWith("slow") ? 201 : 422);
    if (path.endsWith("slow")) {
      assertThat(EndpointClient.text(last)).isEqualTo("{\"send\":1}");
    }
  }

  /** Runs {@code request} while the executor's only thread is held; frees it after. */
  private HttpResponse<byte[]> whileExecutorHeld(Callable<HttpResponse<byte[]>> request)
      throws Exception {
    CountDownLatch release = new CountDownLatch(1);
    QueuedWork.release = release;
    QueuedWork.blockStarted = new CountDownLatch(1);
    CompletableFuture<HttpResponse<byte[]>> blocking =
        MvcProbes.sendAsync(port(), "/probeG/block", null);
    assertThat(QueuedWork.blockStarted.await(30, TimeUnit.SECONDS))
        .as("the blocking task holds the executor's only thread")
        .isTrue();
    try {
      return request.call();
    } finally {
      release.countDown();
      blocking.get(60, TimeUnit.SECONDS);
    }
  }

  /** Posts again while the answer is 409 or 503 (the executor still busy), for 20 s. */
  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(QueuedWork.class)
  static class QueuedWorkApplication {}

  @RestController
  static class QueuedWork {
    static final AtomicInteger entered = new AtomicInteger();
    static final AtomicInteger callableEntered = new AtomicInteger();
    static final Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();
    static volatile CountDownLatch blockStarted = new CountDownLatch(1);
    static volatile CountDownLatch release = new CountDownLatch(1);

    private final Executor executor;

    QueuedWork(@Qualifier("applicationTaskExecutor") Executor executor) {
      this.executor = executor;
    }

    /**
     * Hands the async executor a task that holds its only thread until the test releases it: queued
     * behind the running task, so it runs before any work queued after this call.
     */
    private void holdTheExecutorNext() {
      CountDownLatch started = blockStarted;
      CountDownLatch held = release;
      executor.execute(
          () -> {
            started.countDown();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (held.getCount() > 0 && System.nanoTime() < deadline) {
              try {
                held.await(100, TimeUnit.MILLISECONDS);
              } catch (InterruptedException e) {
                // keep the thread busy until released
              }
            }
          });
    }

    /** Sends in its Callable, then streams the receipt (Spring MVC's second async stage). */
    @PostMapping("/probeG/callable-then-stream")
    @IdempotentEndpoint
    public Callable<ResponseEntity<StreamingResponseBody>> callableThenStream(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      return () -> {
        int n = send(key);
        holdTheExecutorNext();
        return ResponseEntity.status(201)
            .contentType(MediaType.APPLICATION_JSON)
            .body(out -> out.write(("{\"send\":" + n + "}").getBytes(StandardCharsets.UTF_8)));
      };
    }

    /** Sends in its Callable, then formats the answer in a second Callable. */
    @PostMapping("/probeG/callable-then-callable")
    @IdempotentEndpoint
    public Callable<Callable<ResponseEntity<Map<String, Object>>>> callableThenCallable(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      return () -> {
        int n = send(key);
        holdTheExecutorNext();
        return () -> ResponseEntity.status(201).body(Map.of("send", n));
      };
    }

    static volatile CountDownLatch slowSend = new CountDownLatch(0);

    /**
     * Returns at once a second Callable, which sends, then waits (up to 20 s) for the test: past
     * the request timeout.
     */
    @PostMapping("/probeG/callable-then-slow")
    @IdempotentEndpoint
    public Callable<Callable<ResponseEntity<Map<String, Object>>>> callableThenSlow(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      CountDownLatch held = slowSend;
      return () ->
          () -> {
            int n = send(key);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (held.getCount() > 0 && System.nanoTime() < deadline) {
              try {
                held.await(100, TimeUnit.MILLISECONDS);
              } catch (InterruptedException e) {
                // the provider call goes on
              }
            }
            return ResponseEntity.status(201).body(Map.of("send", n));
          };
    }

    /**
     * Returns at once a future that a thread of its own completes once it sent and waited (up to 20
     * s) for the test: past the request timeout.
     */
    @PostMapping("/probeG/callable-then-future")
    @IdempotentEndpoint
    public Callable<CompletableFuture<ResponseEntity<Map<String, Object>>>> callableThenFuture(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      CountDownLatch held = slowSend;
      return () -> {
        CompletableFuture<ResponseEntity<Map<String, Object>>> result = new CompletableFuture<>();
        Thread provider =
            new Thread(
                () -> {
                  int n = send(key);
                  long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
                  while (held.getCount() > 0 && System.nanoTime() < deadline) {
                    try {
                      held.await(100, TimeUnit.MILLISECONDS);
                    } catch (InterruptedException e) {
                      // the provider call goes on
                    }
                  }
                  result.complete(ResponseEntity.status(201).body(Map.of("send", n)));
                },
                "probeG-provider");
        provider.setDaemon(true);
        provider.start();
        return result;
      };
    }

    static int sendsOf(String key) {
      AtomicInteger n = sends.get(key);
      return n == null ? 0 : n.get();
    }

    private static int send(String key) {
      return sends.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
    }

    /** Not guarded: holds the async executor's only thread until the test releases it. */
    @PostMapping("/probeG/block")
    public Callable<String> block() {
      CountDownLatch started = blockStarted;
      CountDownLatch held = release;
      return () -> {
        started.countDown();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (held.getCount() > 0 && System.nanoTime() < deadline) {
          try {
            held.await(100, TimeUnit.MILLISECONDS);
          } catch (InterruptedException timeoutCancel) {
            // its own request's timeout: keep the thread busy regardless
          }
        }
        return "done";
      };
    }

    /** Sends in the method body, then streams the receipt. */
    @PostMapping("/probeG/send-then-stream")
    @IdempotentEndpoint
    public ResponseEntity<StreamingResponseBody> sendThenStream(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      int n = send(key);
      return ResponseEntity.status(201)
          .contentType(MediaType.APPLICATION_JSON)
          .body(out -> out.write(("{\"send\":" + n + "}").getBytes(StandardCharsets.UTF_8)));
    }

    /** Sends in the method body, then formats the answer in a Callable. */
    @PostMapping("/probeG/send-then-callable")
    @IdempotentEndpoint
    public Callable<ResponseEntity<Map<String, Object>>> sendThenCallable(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      int n = send(key);
      return () -> ResponseEntity.status(201).body(Map.of("send", n));
    }

    /** Sends in its Callable. */
    @PostMapping("/probeG/callable")
    @IdempotentEndpoint
    public Callable<ResponseEntity<Map<String, Object>>> callable(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      callableEntered.incrementAndGet();
      return () -> ResponseEntity.status(201).body(Map.of("send", send(key)));
    }
  }
}
