package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import jakarta.servlet.http.HttpServletRequest;
import java.net.http.HttpResponse;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.context.request.RequestContextHolder;
import org.springframework.web.context.request.ServletRequestAttributes;

/**
 * Probe (probeL) of 85e251d (fixqueue): a {@code Callable} still queued in Spring MVC's async
 * executor at the request timeout is taken over and run by the starter, detached from its request,
 * "with the request attributes the request had" (docs/spring-boot.md). On time, a {@code Callable}
 * may read its request (a header, to echo it in the receipt) after its provider call: the request
 * is still in async processing then. Taken over, the work runs after the timeout answered the
 * client, when the container may have recycled the request. The work sends, then reads the request
 * (the handler's {@code HttpServletRequest} parameter, or through {@code RequestContextHolder})
 * once the client got its 409. One application on a real Redis, {@code
 * spring.mvc.async.request-timeout=500ms}, Spring MVC's async executor one thread held by an
 * unguarded request while the guarded one waits in its queue. Each key must send once: the retry a
 * replay (or 422), never the handler run again.
 */
class MvcTakenOverReadsRequestProbeTest extends MvcProbeApplication {

  MvcTakenOverReadsRequestProbeTest() {
    super(
        ReadsRequestApplication.class,
        // each row's work waits for the timeout's answer, whatever its length; Tomcat checks async
        // timeouts once a second, so 500 ms ends a request at the first check past it (1 s, at the
        // second: about 2 s a row)
        "spring.mvc.async.request-timeout=500ms",
        "spring.task.execution.pool.core-size=1",
        "spring.task.execution.pool.max-size=1");
  }

  @Override
  public int runs() {
    return ReadsRequest.entered.get();
  }

  /**
   * Was an open finding (probeL, medium: a second send, SPEC 1), fixed by fixreq: when the
   * container ends a request whose work goes on, the starter's request wrapper answers from a copy
   * of it (BodyCachingRequest.outlivedByItsWork), so the read succeeds. Work that sent, then reads
   * its request (its {@code HttpServletRequest} parameter, or through {@code RequestContextHolder},
   * as it may on time) after the timeout answered the client: Tomcat recycled the request, so the
   * read throws {@code IllegalStateException}; nothing maps it (a 500), so the key is released and
   * the retry runs the handler again and sends a second time. Both for queued work taken over
   * (fixqueue, 85e251d: the work would not have run at all before) and for work that began on time
   * and was detached at the timeout (the "started" rows: older than fixqueue). Fails on Boot 3.5,
   * commit b5a388a, every row: "sends for the key (on threads [idempotent-endpoint-taken-over-1,
   * idempotent-endpoint-1]; first answer 409 ...; the work's request read: failed:
   * java.lang.IllegalStateException: The request object has been recycled and is no longer
   * associated with this facade; last 201 replayed=null {"send":2,...}) expected: 1 but was: 2".
   * The same three rows fail on Boot 4.0 (spring-boot-4-tests), same message.
   */
  @ParameterizedTest
  @CsvSource({
    "/probeL/send-then-read-parameter, true",
    "/probeL/send-then-read-holder, true",
    "/probeL/send-then-read-parameter, false"
  })
  void workThatReadsItsRequestAfterTheTimeoutSendsOnce(String path, boolean queued)
      throws Exception {
    sendsOnce(path, queued);
  }

  /**
   * The same work reading nothing from its request: one send, the retry a replay, queued (taken
   * over) or begun on time (detached). Passes on Boot 3.5.
   */
  @ParameterizedTest
  @ValueSource(booleans = {true, false})
  void workThatReadsNothingAfterTheTimeoutSendsOnce(boolean queued) throws Exception {
    HttpResponse<byte[]> last = sendsOnce("/probeL/send-then-no-read", queued);
    assertThat(last.statusCode()).as(MvcProbes.replayed(last)).isEqualTo(201);
    assertThat(EndpointClient.header(last, IdempotentEndpointInterceptor.REPLAYED_HEADER))
        .isEqualTo("true");
  }

  /**
   * Posts to {@code path} (its work queued behind a held executor if {@code queued}, else begun at
   * once), lets the work go on once the client got its timeout answer, retries, and asserts one
   * send.
   */
  private HttpResponse<byte[]> sendsOnce(String path, boolean queued) throws Exception {
    String key = EndpointClient.newKey();
    HttpResponse<byte[]> timedOut = firstAnswerAtTheTimeout(path, key, queued);
    HttpResponse<byte[]> last = MvcProbes.retryUntilAnswered(this, path, key);
    assertThat(ReadsRequest.sendsOf(key))
        .as(
            "sends for the key (on threads %s; first answer %s; the work's request read: %s;"
                + " last %s)",
            ReadsRequest.sendThreads.get(key),
            timedOut.statusCode() + " " + EndpointClient.text(timedOut),
            ReadsRequest.readOutcome.get(key),
            MvcProbes.replayed(last))
        .isEqualTo(1);
    return last;
  }

  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ReadsRequest.class)
  static class ReadsRequestApplication {}

  @RestController
  static class ReadsRequest {
    static final AtomicInteger entered = new AtomicInteger();
    static final Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();
    static final Map<String, String> readOutcome = new ConcurrentHashMap<>();
    static final HeldExecutor HELD = new HeldExecutor();

    /** Sends, waits for the first answer (20 s at most), then reads its request parameter. */
    @PostMapping("/probeL/send-then-read-parameter")
    @IdempotentEndpoint
    public Callable<ResponseEntity<Map<String, Object>>> sendThenReadParameter(
        @RequestHeader("Idempotency-Key") String key, HttpServletRequest request) {
      entered.incrementAndGet();
      CountDownLatch answered = HELD.firstAnswered;
      return () -> sendThenRead(key, answered, () -> request);
    }

    /** Control: sends, waits for the first answer, reads nothing. */
    @PostMapping("/probeL/send-then-no-read")
    @IdempotentEndpoint
    public Callable<ResponseEntity<Map<String, Object>>> sendThenNoRead(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      CountDownLatch answered = HELD.firstAnswered;
      return () -> sendThenRead(key, answered, () -> null);
    }

    /** As above, the request found through {@code RequestContextHolder}. */
    @PostMapping("/probeL/send-then-read-holder")
    @IdempotentEndpoint
    public Callable<ResponseEntity<Map<String, Object>>> sendThenReadHolder(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      CountDownLatch answered = HELD.firstAnswered;
      return () ->
          sendThenRead(
              key,
              answered,
              () ->
                  ((ServletRequestAttributes) RequestContextHolder.currentRequestAttributes())
                      .getRequest());
    }

    private static ResponseEntity<Map<String, Object>> sendThenRead(
        String key,
        CountDownLatch answered,
        java.util.function.Supplier<HttpServletRequest> request)
        throws InterruptedException {
      int n = send(key);
      answered.await(20, TimeUnit.SECONDS);
      AtomicReference<String> echoed = new AtomicReference<>();
      try {
        HttpServletRequest read = request.get();
        echoed.set(read == null ? "not read" : read.getHeader("Idempotency-Key"));
        readOutcome.putIfAbsent(key, "read " + echoed.get());
      } catch (RuntimeException e) {
        readOutcome.putIfAbsent(key, "failed: " + e);
        throw e;
      }
      Map<String, Object> body = new HashMap<>();
      body.put("send", n);
      body.put("key", String.valueOf(echoed.get()));
      return ResponseEntity.status(201).body(body);
    }

    static int sendsOf(String key) {
      AtomicInteger n = sends.get(key);
      return n == null ? 0 : n.get();
    }

    static final Map<String, java.util.List<String>> sendThreads = new ConcurrentHashMap<>();

    private static int send(String key) {
      sendThreads
          .computeIfAbsent(key, k -> new java.util.concurrent.CopyOnWriteArrayList<>())
          .add(Thread.currentThread().getName());
      return sends.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
    }

    /** Not guarded: holds the async executor's only thread until the test releases it. */
    @PostMapping("/probeL/block")
    public Callable<String> block() {
      return HELD.block();
    }

    static final Map<String, AtomicInteger> handlerRuns = new ConcurrentHashMap<>();

    /**
     * (fixreq) On its first run for a key: waits for the first answer (20 s at most), then fails
     * before it sends or touches its request (a failure nothing maps); run again for the key (by
     * the retry, the key released): sends.
     */
    @PostMapping("/fixreq/fail-first-then-send")
    @IdempotentEndpoint
    public Callable<ResponseEntity<Map<String, Object>>> failFirstThenSend(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      CountDownLatch answered = HELD.firstAnswered;
      int run = handlerRuns.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
      return () -> {
        if (run == 1) {
          answered.await(20, TimeUnit.SECONDS);
          readOutcome.putIfAbsent(key, "failed before it sent or read its request");
          throw new IllegalStateException("the provider refused the message; nothing was sent");
        }
        Map<String, Object> body = new HashMap<>();
        body.put("send", send(key));
        return ResponseEntity.status(201).body(body);
      };
    }
  }

  /**
   * (fixreq) The work that sent and then read its request after the timeout answered its client
   * read what it would have read on time (the request's own key header, through its parameter or
   * {@code RequestContextHolder}): its result is stored and the retry gets it replayed, the key
   * echoed, taken over (queued) or detached (begun on time).
   */
  @ParameterizedTest
  @CsvSource({
    "/probeL/send-then-read-parameter, true",
    "/probeL/send-then-read-holder, true",
    "/probeL/send-then-read-parameter, false"
  })
  void workThatReadsItsRequestAfterTheTimeoutReadsItAndIsReplayed(String path, boolean queued)
      throws Exception {
    String key = EndpointClient.newKey();
    HttpResponse<byte[]> first = firstAnswerAtTheTimeout(path, key, queued);
    HttpResponse<byte[]> last = MvcProbes.retryUntilAnswered(this, path, key);
    assertThat(ReadsRequest.readOutcome.get(key)).isEqualTo("read " + key);
    assertThat(ReadsRequest.sendsOf(key)).isEqualTo(1);
    assertThat(last.statusCode())
        .as(
            "first %s %s, last %s",
            first.statusCode(), EndpointClient.text(first), MvcProbes.replayed(last))
        .isEqualTo(201);
    assertThat(EndpointClient.header(last, IdempotentEndpointInterceptor.REPLAYED_HEADER))
        .isEqualTo("true");
    assertThat(EndpointClient.text(last)).contains(key.replace("\"", ""));
  }

  /**
   * (fixreq) Work that fails on its own, before it sends or touches its request, after the timeout
   * answered its client (taken over, or detached): nothing maps its failure, so its key is
   * released, as for a request that failed on time, and the retry runs the handler again, which
   * sends once.
   */
  @ParameterizedTest
  @ValueSource(booleans = {true, false})
  void workThatFailsBeforeItTouchesItsRequestIsReleased(boolean queued) throws Exception {
    String path = "/fixreq/fail-first-then-send";
    String key = EndpointClient.newKey();
    HttpResponse<byte[]> first = firstAnswerAtTheTimeout(path, key, queued);
    assertThat(first.statusCode()).as(EndpointClient.text(first)).isEqualTo(409);
    HttpResponse<byte[]> last = MvcProbes.retryUntilAnswered(this, path, key);
    assertThat(ReadsRequest.readOutcome.get(key))
        .isEqualTo("failed before it sent or read its request");
    assertThat(last.statusCode()).as(EndpointClient.text(last)).isEqualTo(201);
    assertThat(ReadsRequest.handlerRuns.get(key).get()).as("handler runs").isEqualTo(2);
    assertThat(ReadsRequest.sendsOf(key)).isEqualTo(1);
  }

  /**
   * (fixreq) Posts to {@code path} (its work queued behind a held executor if {@code queued}, else
   * begun at once) and returns the answer its timeout gave; the work goes on once the client got
   * it, and this waits (20 s at most) until it read its request, or failed.
   */
  private HttpResponse<byte[]> firstAnswerAtTheTimeout(String path, String key, boolean queued)
      throws Exception {
    return ReadsRequest.HELD.firstAnswer(
        port(),
        "/probeL/block",
        queued,
        true,
        () -> post(path, key, "{}"),
        () -> ReadsRequest.readOutcome.containsKey(key));
  }
}
