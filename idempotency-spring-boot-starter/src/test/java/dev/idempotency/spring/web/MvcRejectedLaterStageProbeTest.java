package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.http.HttpResponse;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.http.ResponseEntity;
import org.springframework.scheduling.concurrent.ThreadPoolTaskExecutor;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.context.request.async.DeferredResult;
import org.springframework.web.context.request.async.WebAsyncTask;

/**
 * Probe (probeR) of fixreject's later stage (b870af0): "a later stage's async work refused by its
 * executor is recorded as answered without its body", since a stage that ran may have sent. Here
 * the stage that ran did not send: the handler returns a {@code CompletableFuture} (or a {@code
 * DeferredResult}) whose value is a {@code Callable} that is the send, and Spring MVC's executor
 * (one thread, no queue, held by an unguarded request) refuses that {@code Callable}. It never
 * runs: nothing was sent, yet the key is kept as answered and the retry gets {@code 422
 * response-not-stored}. One application on a real Redis.
 */
class MvcRejectedLaterStageProbeTest extends MvcProbeApplication {

  MvcRejectedLaterStageProbeTest() {
    super(
        RejectedLaterStageApplication.class,
        "spring.mvc.async.request-timeout=5s",
        "spring.task.execution.pool.core-size=1",
        "spring.task.execution.pool.max-size=1",
        "spring.task.execution.pool.queue-capacity=0");
  }

  @AfterAll
  void releaseWork() {
    LaterStage.PROVIDER.shutdown();
    LaterStage.OWN.shutdown();
  }

  @Override
  public int runs() {
    return LaterStage.entered.get();
  }

  /**
   * The later stage is the send and its executor refused it: the retry must get the send (one send,
   * 201), not a record of a send that never happened.
   */
  /*
   * Was an open finding (probeR, on 5cfa0b8; medium: a lost send, SPEC 1 "no lost send"), fixed
   * by probeR: AsyncWork.laterStageRejected recorded any refused later stage as answered (only a
   * first stage's work was kept to take over), though a refused task never began. Failed on Boot
   * 3.5 and 4.0, both rows: "sends for the key (0 before the retry; first answer 500 {...}; last
   * 422 replayed=null {"type":"/problems/response-not-stored",...,"original-status":200})
   * expected: 1 but was: 0". Now a refused later stage's Callable is taken over (409, the retry
   * gets the send replayed).
   */
  @ParameterizedTest
  @ValueSource(
      strings = {"/probeR/future-of-sending-callable", "/probeR/deferred-of-sending-callable"})
  void aRefusedLaterStageThatIsTheSendIsSentOnce(String path) throws Exception {
    String key = EndpointClient.newKey();
    HttpResponse<byte[]> first = whileExecutorHeld(() -> post(path, key, "{}"));
    int sentBeforeRetry = LaterStage.sendsOf(key);
    HttpResponse<byte[]> last = MvcProbes.retryUntilAnswered(this, path, key);
    assertThat(LaterStage.sendsOf(key))
        .as(
            "sends for the key (%d before the retry; first answer %s; last %s)",
            sentBeforeRetry,
            first.statusCode() + " " + EndpointClient.text(first),
            MvcProbes.replayed(last))
        .isEqualTo(1);
    assertThat(last.statusCode()).as(MvcProbes.replayed(last)).isEqualTo(201);
  }

  /**
   * Refused shapes that keep SPEC 1 (probeR): a {@code WebAsyncTask} with its own timeout callback
   * whose own executor refuses it (taken over: 409, the retry gets the send replayed), and a
   * refused {@code Callable} whose result is a {@code DeferredResult} that another thread completes
   * with the send (taken over, and the {@code DeferredResult} awaited since fixemit: the retry gets
   * the send replayed; before fixemit it was not followed, and the call was recorded as answered
   * without its body, 422). One send each, never a second.
   */
  @ParameterizedTest
  @CsvSource({
    "/probeR/own-task-with-timeout-callback, 201",
    "/probeR/callable-of-deferred-send, 201"
  })
  void aRefusedTaskWithItsOwnTimeoutOrADeferredResultSendsOnce(String path, int retryStatus)
      throws Exception {
    String key = EndpointClient.newKey();
    CountDownLatch ownStarted = new CountDownLatch(1);
    CountDownLatch ownRelease = new CountDownLatch(1);
    LaterStage.OWN.execute(() -> MvcRejectedWorkProbeTest.hold(ownStarted, ownRelease));
    assertThat(ownStarted.await(30, TimeUnit.SECONDS)).isTrue();
    HttpResponse<byte[]> first;
    try {
      first = whileExecutorHeld(() -> post(path, key, "{}"));
    } finally {
      ownRelease.countDown();
    }
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (LaterStage.sendsOf(key) == 0 && System.nanoTime() < deadline) {
      Thread.sleep(20);
    }
    HttpResponse<byte[]> last = MvcProbes.retryUntilAnswered(this, path, key);
    assertThat(LaterStage.sendsOf(key))
        .as(
            "sends for the key (first answer %s; last %s)",
            first.statusCode() + " " + EndpointClient.text(first), MvcProbes.replayed(last))
        .isEqualTo(1);
    assertThat(first.statusCode()).as(EndpointClient.text(first)).isEqualTo(409);
    assertThat(last.statusCode()).as(MvcProbes.replayed(last)).isEqualTo(retryStatus);
  }

  private <T> T whileExecutorHeld(Callable<T> request) throws Exception {
    CountDownLatch release = new CountDownLatch(1);
    LaterStage.release = release;
    LaterStage.blockStarted = new CountDownLatch(1);
    CompletableFuture<HttpResponse<byte[]>> blocking =
        MvcProbes.sendAsync(port(), "/probeR/later-block", null);
    assertThat(LaterStage.blockStarted.await(30, TimeUnit.SECONDS)).isTrue();
    try {
      return request.call();
    } finally {
      release.countDown();
      blocking.get(60, TimeUnit.SECONDS);
    }
  }

  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(LaterStage.class)
  static class RejectedLaterStageApplication {}

  @RestController
  static class LaterStage {
    static final AtomicInteger entered = new AtomicInteger();
    static final Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();
    static volatile CountDownLatch blockStarted = new CountDownLatch(1);
    static volatile CountDownLatch release = new CountDownLatch(1);
    static final ExecutorService PROVIDER = Executors.newCachedThreadPool();

    static int sendsOf(String key) {
      AtomicInteger n = sends.get(key);
      return n == null ? 0 : n.get();
    }

    private static ResponseEntity<Map<String, Object>> send(String key) {
      int n = sends.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
      return ResponseEntity.status(201).body(Map.of("send", n));
    }

    /** A look-up on another thread, then a Callable that sends. */
    @PostMapping("/probeR/future-of-sending-callable")
    @IdempotentEndpoint
    public CompletableFuture<Callable<ResponseEntity<Map<String, Object>>>> futureOfSendingCallable(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      return CompletableFuture.supplyAsync(() -> () -> send(key), PROVIDER);
    }

    /** The same with a DeferredResult set on another thread. */
    @PostMapping("/probeR/deferred-of-sending-callable")
    @IdempotentEndpoint
    public DeferredResult<Callable<ResponseEntity<Map<String, Object>>>> deferredOfSendingCallable(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      DeferredResult<Callable<ResponseEntity<Map<String, Object>>>> result = new DeferredResult<>();
      PROVIDER.execute(() -> result.setResult(() -> send(key)));
      return result;
    }

    /** A WebAsyncTask's own executor: one thread, no queue. */
    static final ThreadPoolTaskExecutor OWN = ownExecutor();

    private static ThreadPoolTaskExecutor ownExecutor() {
      ThreadPoolTaskExecutor executor = new ThreadPoolTaskExecutor();
      executor.setCorePoolSize(1);
      executor.setMaxPoolSize(1);
      executor.setQueueCapacity(0);
      executor.setThreadNamePrefix("probeR-own-");
      executor.setDaemon(true);
      executor.initialize();
      return executor;
    }

    /** Sends in a task on its own (refusing) executor, with its own timeout callback. */
    @PostMapping("/probeR/own-task-with-timeout-callback")
    @IdempotentEndpoint
    public WebAsyncTask<ResponseEntity<Map<String, Object>>> ownTaskWithTimeoutCallback(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      WebAsyncTask<ResponseEntity<Map<String, Object>>> task =
          new WebAsyncTask<>(2_000L, OWN, () -> send(key));
      task.onTimeout(() -> ResponseEntity.status(202).body(Map.of("accepted", true)));
      return task;
    }

    /** A Callable whose DeferredResult another thread completes with the send. */
    @PostMapping("/probeR/callable-of-deferred-send")
    @IdempotentEndpoint
    public Callable<DeferredResult<ResponseEntity<Map<String, Object>>>> callableOfDeferredSend(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      return () -> {
        DeferredResult<ResponseEntity<Map<String, Object>>> result = new DeferredResult<>();
        PROVIDER.execute(() -> result.setResult(send(key)));
        return result;
      };
    }

    /** Not guarded: holds Spring MVC's executor's only thread until the test releases it. */
    @PostMapping("/probeR/later-block")
    public Callable<String> block() {
      CountDownLatch started = blockStarted;
      CountDownLatch held = release;
      return () -> {
        started.countDown();
        MvcRejectedWorkProbeTest.hold(new CountDownLatch(1), held);
        return "done";
      };
    }
  }
}
