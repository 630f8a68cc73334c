package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.testservers.Poll;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.context.request.async.DeferredResult;

/**
 * probeZ, of fixdeferred (merge a648f8e): a taken-over {@code Callable} (Spring MVC's one-thread
 * executor, no queue, held by an unguarded request, refuses it; the starter runs it, 409 to the
 * client) that sends and returns a {@code DeferredResult} answered only at its own 1 s timeout, in
 * the shapes Spring MVC handles on time: an {@code onTimeout} callback that throws before the
 * timeout result is set; a timeout result that is itself a {@code Callable} (which, here, is the
 * send); a timeout result that is another {@code DeferredResult} answered at its own timeout. And
 * the application closed while the taken-over work awaits a {@code DeferredResult} whose own
 * timeout is far beyond the close grace. SPEC 1: one send per key, the retry gets the send's answer
 * (201 "send":1), the key is not held for good. One application on a real Redis.
 */
class MvcTakenOverDeferredEdgesProbeTest extends MvcProbeApplication {

  MvcTakenOverDeferredEdgesProbeTest() {
    super(DeferredEdgesApplication.class, properties());
  }

  private static String[] properties() {
    return new String[] {
      "spring.mvc.async.request-timeout=5s",
      "idempotency.lease=3s",
      "spring.task.execution.pool.core-size=1",
      "spring.task.execution.pool.max-size=1",
      "spring.task.execution.pool.queue-capacity=0"
    };
  }

  @Override
  public int runs() {
    return DeferredEdges.entered.get();
  }

  /**
   * Refused, taken over, then expired by the starter at the DeferredResult's own timeout: one send,
   * the retry gets 201 "send":1.
   */
  @ParameterizedTest
  @ValueSource(
      strings = {
        "/probeZ/deferred/on-timeout-throws",
        "/probeZ/deferred/timeout-result-callable",
        "/probeZ/deferred/timeout-result-deferred"
      })
  void aTakenOverDeferredResultExpiredInSpringMvcsShapesSendsOnce(String path) throws Exception {
    String key = EndpointClient.newKey();
    HttpResponse<byte[]> first = whileExecutorHeld(port(), () -> post(path, key, "{}"));
    Poll.within(Duration.ofSeconds(20))
        .until("the work sent", () -> DeferredEdges.sendsOf(key) > 0);
    HttpResponse<byte[]> last = MvcProbes.retryUntilAnswered(this, path, key);
    String shown =
        String.format(
            "(first answer %s; last %s)",
            first.statusCode() + " " + EndpointClient.text(first), MvcProbes.replayed(last));
    assertThat(DeferredEdges.sendsOf(key)).as("sends for the key " + shown).isEqualTo(1);
    assertThat(first.statusCode()).as("the first answer " + shown).isEqualTo(409);
    assertThat(last.statusCode()).as("the retry " + shown).isEqualTo(201);
    assertThat(EndpointClient.text(last)).as("the retry " + shown).contains("\"send\":1");
  }

  /**
   * The application closes (graceful shutdown, the guard's 20 s close grace) while a taken-over
   * Callable that sent awaits its DeferredResult, whose own timeout (120 s) and timeout result lie
   * beyond the grace: the starter expires it before the grace runs out, so the timeout result is
   * recorded, and the application started again on the same Redis replays it. About 30 s.
   */
  @Tag("extended")
  @Test
  void aCloseWhileATakenOverDeferredResultIsAwaitedRecordsItsTimeoutResult() throws Exception {
    String path = "/probeZ/deferred/long";
    String key = EndpointClient.newKey();
    CountDownLatch closing = new CountDownLatch(1);
    ConfigurableApplicationContext own =
        MvcProbes.startOn(DeferredEdgesApplication.class, "redis", closing, properties());
    int ownPort = MvcProbes.portOf(own);
    EndpointClient ownClient = client(ownPort);
    HttpResponse<byte[]> first = whileExecutorHeld(ownPort, () -> ownClient.post(path, key, "{}"));
    Poll.within(Duration.ofSeconds(20))
        .until("the work sent", () -> DeferredEdges.sendsOf(key) > 0);
    long closeStarted = System.nanoTime();
    CompletableFuture<Void> closed = CompletableFuture.runAsync(own::close);
    closed.get(90, TimeUnit.SECONDS);
    long closeSeconds = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - closeStarted);
    int[] restartedPort = {0};
    EndpointClient restarted = client(() -> restartedPort[0]);
    HttpResponse<byte[]> replay =
        MvcProbes.replayAfterRestart(
            () ->
                MvcProbes.startOn(
                    DeferredEdgesApplication.class, "redis", new CountDownLatch(1), properties()),
            p -> restartedPort[0] = p,
            restarted,
            path,
            key);
    String shown =
        String.format(
            "(first answer %s; close took %d s; after the restart %s)",
            first.statusCode() + " " + EndpointClient.text(first),
            closeSeconds,
            MvcProbes.replayed(replay));
    assertThat(DeferredEdges.sendsOf(key)).as("sends for the key " + shown).isEqualTo(1);
    assertThat(replay.statusCode()).as("the retry " + shown).isEqualTo(201);
    assertThat(EndpointClient.text(replay)).as("the retry " + shown).contains("\"send\":1");
  }

  private static EndpointClient client(int port) {
    return client(() -> port);
  }

  private static EndpointClient client(java.util.function.IntSupplier port) {
    return new EndpointClient() {
      @Override
      public int port() {
        return port.getAsInt();
      }

      @Override
      public int runs() {
        return DeferredEdges.entered.get();
      }
    };
  }

  private static <T> T whileExecutorHeld(int port, Callable<T> request) throws Exception {
    CountDownLatch release = new CountDownLatch(1);
    DeferredEdges.release = release;
    DeferredEdges.blockStarted = new CountDownLatch(1);
    CompletableFuture<HttpResponse<byte[]>> blocking =
        MvcProbes.sendAsync(port, "/probeZ/deferred-block", null);
    assertThat(DeferredEdges.blockStarted.await(30, TimeUnit.SECONDS)).isTrue();
    try {
      return request.call();
    } finally {
      release.countDown();
      blocking.get(60, TimeUnit.SECONDS);
    }
  }

  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(DeferredEdges.class)
  static class DeferredEdgesApplication {}

  @RestController
  static class DeferredEdges {
    static final AtomicInteger entered = new AtomicInteger();
    static final Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();
    static volatile CountDownLatch blockStarted = new CountDownLatch(1);
    static volatile CountDownLatch release = new CountDownLatch(1);

    static int sendsOf(String key) {
      AtomicInteger n = sends.get(key);
      return n == null ? 0 : n.get();
    }

    private static ResponseEntity<Map<String, Object>> send(String key) {
      int n = sends.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
      return ResponseEntity.status(201).body(Map.of("send", n));
    }

    /** Sends; its DeferredResult's onTimeout throws, then its timeout result is the send's. */
    @PostMapping("/probeZ/deferred/on-timeout-throws")
    @IdempotentEndpoint
    public Callable<DeferredResult<ResponseEntity<Map<String, Object>>>> onTimeoutThrows(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      return () -> {
        DeferredResult<ResponseEntity<Map<String, Object>>> result =
            new DeferredResult<>(1_000L, send(key));
        result.onTimeout(
            () -> {
              throw new IllegalStateException("probeZ: onTimeout fails");
            });
        return result;
      };
    }

    /** Its DeferredResult's timeout result is a Callable, which sends. */
    @PostMapping("/probeZ/deferred/timeout-result-callable")
    @IdempotentEndpoint
    public Callable<DeferredResult<Object>> timeoutResultCallable(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      return () -> {
        Callable<ResponseEntity<Map<String, Object>>> sending = () -> send(key);
        return new DeferredResult<>(1_000L, sending);
      };
    }

    /**
     * Sends; its DeferredResult's timeout result is another, whose timeout result is the send's.
     */
    @PostMapping("/probeZ/deferred/timeout-result-deferred")
    @IdempotentEndpoint
    public Callable<DeferredResult<Object>> timeoutResultDeferred(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      return () -> {
        DeferredResult<ResponseEntity<Map<String, Object>>> inner =
            new DeferredResult<>(1_000L, send(key));
        return new DeferredResult<>(1_000L, inner);
      };
    }

    /** Sends; its DeferredResult has a 120 s timeout whose result is the send's. */
    @PostMapping("/probeZ/deferred/long")
    @IdempotentEndpoint
    public Callable<DeferredResult<ResponseEntity<Map<String, Object>>>> longWait(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      return () -> new DeferredResult<>(120_000L, send(key));
    }

    /** Not guarded: holds Spring MVC's executor's only thread until the test releases it. */
    @PostMapping("/probeZ/deferred-block")
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
