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
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.context.request.async.DeferredResult;

/**
 * Probe (probeV) of probeR's fixes (merge 1a7470a) and the taken-over work that awaits a later
 * {@code DeferredResult} (fixemit): Spring MVC's executor (one thread, no queue, held by an
 * unguarded request) refuses an {@code @IdempotentEndpoint}'s {@code Callable}, which the starter
 * takes over (409 to the client) and runs to its end. Shapes: a {@code CompletableFuture} whose
 * {@code Callable} (a later stage) sends and returns a {@code DeferredResult} another thread sets
 * (nested later stages); and a {@code Callable} that sends and returns a {@code DeferredResult}
 * answered by its own timeout (a timeout result, or an {@code onTimeout} callback that sets it), as
 * a long-poll is: on time Spring MVC expires it and the timeout's answer is stored. One send per
 * key (SPEC 1), and the retry gets the send's answer. One application on a real Redis.
 */
class MvcTakenOverDeferredTimeoutProbeTest extends MvcProbeApplication {

  MvcTakenOverDeferredTimeoutProbeTest() {
    super(
        DeferredTimeoutApplication.class,
        "spring.mvc.async.request-timeout=5s",
        "idempotency.lease=3s",
        "spring.task.execution.pool.core-size=1",
        "spring.task.execution.pool.max-size=1",
        "spring.task.execution.pool.queue-capacity=0");
  }

  @AfterAll
  void releaseWork() {
    DeferredTimeouts.PROVIDER.shutdown();
    DeferredTimeouts.OWN.shutdown();
  }

  @Override
  public int runs() {
    return DeferredTimeouts.entered.get();
  }

  /**
   * Controls, on time (the executor free): one send, 201, the retry replays it. Nested later stages
   * refused: taken over, one send, the retry gets it replayed. Passes on Boot 3.5 and 4.0.
   */
  @ParameterizedTest
  @ValueSource(
      strings = {
        "on-time:/probeV/callable-of-deferred-timeout-result",
        "on-time:/probeV/callable-of-deferred-on-timeout",
        "refused:/probeV/future-of-callable-of-deferred-send"
      })
  void sendsOnceAndTheRetryGetsTheSend(String row) throws Exception {
    sendsOnceAndTheRetryGetsTheSend(
        row.startsWith("refused:"), row.substring(row.indexOf(':') + 1));
  }

  /**
   * Was an open finding (probeV, on 164f714; low-medium: no progress and a thread held for good,
   * not a second or lost send), fixed by fixdeferred. A refused (taken-over) Callable's
   * DeferredResult was awaited by LaterStages.awaitDeferred with no bound; the starter never
   * expired it, so a DeferredResult that only its timeout answers (a timeout result, onTimeout)
   * never ended: the key stayed in progress (its lease, 3 s here, renewed while the work "ran":
   * still 409 after 20 s), every retry got 409 until the application stopped, and a taken-over
   * thread waited for ever. Failed on Boot 3.5 and 4.0: 'the retry (one send) ... expected: 201 but
   * was: 409'. Now the wait ends at the DeferredResult's own timeout (else the request's async
   * timeout, or the close grace at a shutdown) and it is expired as Spring MVC expires one: its
   * onTimeout callback, then its timeout result, stored as on time (the on-time rows above).
   */
  @ParameterizedTest
  @ValueSource(
      strings = {
        "/probeV/callable-of-deferred-timeout-result",
        "/probeV/callable-of-deferred-on-timeout"
      })
  void aRefusedCallableWhoseDeferredResultItsTimeoutAnswersIsAnswered(String path)
      throws Exception {
    sendsOnceAndTheRetryGetsTheSend(true, path);
  }

  /**
   * (fixdeferred) A refused Callable that sends, then returns a DeferredResult that nothing
   * answers, not even its 1 s timeout (no timeout result, no onTimeout): at that timeout the stage
   * that ran may have sent and nothing reports whether it did, so the call is recorded as answered
   * without its body: sent once, the retry gets 422 response-not-stored, never a second send (SPEC
   * 1).
   */
  @org.junit.jupiter.api.Test
  void aRefusedCallableWhoseDeferredResultNothingAnswersIsRecordedAsAnswered() throws Exception {
    String path = "/probeV/callable-of-deferred-unanswered";
    String key = EndpointClient.newKey();
    HttpResponse<byte[]> first = whileExecutorHeld(() -> post(path, key, "{}"));
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (DeferredTimeouts.sendsOf(key) == 0 && System.nanoTime() < deadline) {
      Thread.sleep(20);
    }
    HttpResponse<byte[]> last = MvcProbes.retryUntilAnswered(this, path, key);
    String shown =
        String.format(
            "(first answer %s; last %s)",
            first.statusCode() + " " + EndpointClient.text(first), MvcProbes.replayed(last));
    assertThat(DeferredTimeouts.sendsOf(key)).as("sends for the key " + shown).isEqualTo(1);
    assertThat(first.statusCode()).as("the first answer " + shown).isEqualTo(409);
    assertThat(last.statusCode()).as("the retry " + shown).isEqualTo(422);
  }

  /**
   * A later stage that is a {@code WebAsyncTask} on its own executor (one thread, no queue, held),
   * which refuses it: the send never began, so it must be taken over or released, never recorded as
   * answered (a lost send).
   */
  @org.junit.jupiter.api.Test
  void aLaterStageWebAsyncTaskRefusedByItsOwnExecutorSendsOnce() throws Exception {
    String path = "/probeV/future-of-own-task";
    String key = EndpointClient.newKey();
    CountDownLatch ownStarted = new CountDownLatch(1);
    CountDownLatch ownRelease = new CountDownLatch(1);
    DeferredTimeouts.OWN.execute(() -> MvcRejectedWorkProbeTest.hold(ownStarted, ownRelease));
    assertThat(ownStarted.await(30, TimeUnit.SECONDS)).isTrue();
    HttpResponse<byte[]> first;
    try {
      first = post(path, key, "{}");
    } finally {
      ownRelease.countDown();
    }
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (DeferredTimeouts.sendsOf(key) == 0 && System.nanoTime() < deadline) {
      Thread.sleep(20);
    }
    HttpResponse<byte[]> last = MvcProbes.retryUntilAnswered(this, path, key);
    String shown =
        String.format(
            "(first answer %s; last %s)",
            first.statusCode() + " " + EndpointClient.text(first), MvcProbes.replayed(last));
    assertThat(DeferredTimeouts.sendsOf(key)).as("sends for the key " + shown).isEqualTo(1);
    assertThat(last.statusCode()).as("the retry " + shown).isEqualTo(201);
  }

  private void sendsOnceAndTheRetryGetsTheSend(boolean refused, String path) throws Exception {
    String key = EndpointClient.newKey();
    HttpResponse<byte[]> first =
        refused ? whileExecutorHeld(() -> post(path, key, "{}")) : post(path, key, "{}");
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (DeferredTimeouts.sendsOf(key) == 0 && System.nanoTime() < deadline) {
      Thread.sleep(20);
    }
    HttpResponse<byte[]> last = MvcProbes.retryUntilAnswered(this, path, key);
    String shown =
        String.format(
            "(first answer %s; last %s)",
            first.statusCode() + " " + EndpointClient.text(first), MvcProbes.replayed(last));
    assertThat(DeferredTimeouts.sendsOf(key)).as("sends for the key " + shown).isEqualTo(1);
    assertThat(first.statusCode()).as("the first answer " + shown).isEqualTo(refused ? 409 : 201);
    assertThat(last.statusCode()).as("the retry (one send) " + shown).isEqualTo(201);
    assertThat(EndpointClient.text(last)).as("the retry " + shown).contains("\"send\":1");
  }

  private <T> T whileExecutorHeld(Callable<T> request) throws Exception {
    CountDownLatch release = new CountDownLatch(1);
    DeferredTimeouts.release = release;
    DeferredTimeouts.blockStarted = new CountDownLatch(1);
    CompletableFuture<HttpResponse<byte[]>> blocking =
        MvcProbes.sendAsync(port(), "/probeV/deferred-block", null);
    assertThat(DeferredTimeouts.blockStarted.await(30, TimeUnit.SECONDS)).isTrue();
    try {
      return request.call();
    } finally {
      release.countDown();
      blocking.get(60, TimeUnit.SECONDS);
    }
  }

  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(DeferredTimeouts.class)
  static class DeferredTimeoutApplication {}

  @RestController
  static class DeferredTimeouts {
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

    /** Sends, then answers through a DeferredResult that only its 1 s timeout result ends. */
    @PostMapping("/probeV/callable-of-deferred-timeout-result")
    @IdempotentEndpoint
    public Callable<DeferredResult<ResponseEntity<Map<String, Object>>>> timeoutResult(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      return () -> new DeferredResult<>(1_000L, send(key));
    }

    /** Sends, then answers through a DeferredResult that its onTimeout callback sets. */
    @PostMapping("/probeV/callable-of-deferred-on-timeout")
    @IdempotentEndpoint
    public Callable<DeferredResult<ResponseEntity<Map<String, Object>>>> onTimeout(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      return () -> {
        ResponseEntity<Map<String, Object>> sent = send(key);
        DeferredResult<ResponseEntity<Map<String, Object>>> result = new DeferredResult<>(1_000L);
        result.onTimeout(() -> result.setResult(sent));
        return result;
      };
    }

    /** Sends, then returns a DeferredResult that nothing answers, not even its 1 s timeout. */
    @PostMapping("/probeV/callable-of-deferred-unanswered")
    @IdempotentEndpoint
    public Callable<DeferredResult<ResponseEntity<Map<String, Object>>>> unanswered(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      return () -> {
        send(key);
        return new DeferredResult<>(1_000L);
      };
    }

    /**
     * A look-up on another thread, then a Callable (a later stage) that sends, whose answer another
     * thread sets in a DeferredResult.
     */
    @PostMapping("/probeV/future-of-callable-of-deferred-send")
    @IdempotentEndpoint
    public CompletableFuture<Callable<DeferredResult<ResponseEntity<Map<String, Object>>>>>
        futureOfCallableOfDeferred(@RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      return CompletableFuture.supplyAsync(
          () ->
              () -> {
                ResponseEntity<Map<String, Object>> sent = send(key);
                DeferredResult<ResponseEntity<Map<String, Object>>> result = new DeferredResult<>();
                PROVIDER.execute(() -> result.setResult(sent));
                return result;
              },
          PROVIDER);
    }

    /** A WebAsyncTask's own executor: one thread, no queue. */
    static final org.springframework.scheduling.concurrent.ThreadPoolTaskExecutor OWN = own();

    private static org.springframework.scheduling.concurrent.ThreadPoolTaskExecutor own() {
      org.springframework.scheduling.concurrent.ThreadPoolTaskExecutor executor =
          new org.springframework.scheduling.concurrent.ThreadPoolTaskExecutor();
      executor.setCorePoolSize(1);
      executor.setMaxPoolSize(1);
      executor.setQueueCapacity(0);
      executor.setThreadNamePrefix("probeV-own-");
      executor.setDaemon(true);
      executor.initialize();
      return executor;
    }

    /** A look-up on another thread, then a WebAsyncTask on its own executor that sends. */
    @PostMapping("/probeV/future-of-own-task")
    @IdempotentEndpoint
    public CompletableFuture<
            org.springframework.web.context.request.async.WebAsyncTask<
                ResponseEntity<Map<String, Object>>>>
        futureOfOwnTask(@RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      return CompletableFuture.supplyAsync(
          () ->
              new org.springframework.web.context.request.async.WebAsyncTask<>(
                  2_000L, OWN, () -> send(key)),
          PROVIDER);
    }

    /** Not guarded: holds Spring MVC's executor's only thread until the test releases it. */
    @PostMapping("/probeV/deferred-block")
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
