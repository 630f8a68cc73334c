package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.testservers.Poll;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.servlet.mvc.method.annotation.StreamingResponseBody;

/**
 * Probe (probeK) of fixstream (618c0a7): a {@code StreamingResponseBody} that blocks (its provider
 * call held) across the container async timeout (1 s), then across a shutdown whose guard close
 * grace (4 s) runs out before it ends, with a lease of 2 s. The guard's close must not hang on it,
 * and its key must be decided before the grace ends, so that the retry after a restart on the same
 * Redis, well past the lease, does not run the handler again while the first send may still happen.
 * Rows: the handler method's own stream (decided at the grace: {@code
 * AsyncWork.streamOutlivesTheGrace}), and a stream a {@code Callable} returned.
 */
class MvcStreamTimeoutThenShutdownProbeTest implements EndpointClient {

  private int port;

  @Override
  public int port() {
    return port;
  }

  @Override
  public int runs() {
    return BlockingStreams.entered.get();
  }

  private static ConfigurableApplicationContext start(CountDownLatch closing) {
    return MvcProbes.startOn(
        BlockingStreamApplication.class,
        "redis",
        closing,
        "spring.mvc.async.request-timeout=1s",
        "spring.lifecycle.timeout-per-shutdown-phase=1s",
        "idempotency.close-grace-period=4s",
        "idempotency.lease=2s");
  }

  /**
   * The handler's own stream. Passes on Boot 3.5 and 4.0 (the retry after the restart got 422, one
   * run, one send). About 30 to 35 s a row (two starts, the grace, the lease): extended.
   */
  @Tag("extended")
  @ParameterizedTest
  @ValueSource(strings = {"/probeK/blocking-stream"})
  void aStreamBlockedAcrossATimeoutAndAShutdownIsDecidedWithinTheGrace(String path)
      throws Exception {
    blockedAcrossATimeoutAndAShutdown(path);
  }

  /**
   * Was an open finding (low-medium: a second run while the first send may still happen, SPEC 1),
   * probeK; fixed by fixlater with the later stream's timeout: a stream a {@code Callable} returned
   * is marked a stream when shielded, so the timeout awaits its end and the grace decides it, as
   * for the handler's own stream (extended: about 35 s). It was: A stream a {@code Callable}
   * returned is not seen as a stream (only the handler method's result is marked one), so the
   * timeout detaches it as a {@code Callable}'s work (409), the interceptor's stop has nothing to
   * do for a detached call, and nothing records it before the guard's grace runs out: the guard
   * abandons it, its lease (2 s) runs out, and the retry after the restart runs the handler again
   * while the first stream is still held (it sends later: two sends). The handler's own stream, in
   * the same state, is recorded before the grace ends (the row above). A plain {@code Callable}
   * past the grace is abandoned the same way, as docs/spring-boot.md says ("finish for at most
   * idempotency.close-grace-period"; the guard's close: "abandoned as a crash would leave it"), so
   * this is the crash duplicate the docs accept for a {@code Callable}, not the stream rule
   * fixstream made. See the report for the commit and the failure seen.
   */
  @Tag("extended")
  @ParameterizedTest
  @ValueSource(strings = {"/probeK/callable-then-blocking-stream"})
  void aLaterStreamBlockedAcrossATimeoutAndAShutdownIsDecidedWithinTheGrace(String path)
      throws Exception {
    blockedAcrossATimeoutAndAShutdown(path);
  }

  private void blockedAcrossATimeoutAndAShutdown(String path) throws Exception {
    String key = EndpointClient.newKey();
    CountDownLatch gate = new CountDownLatch(1);
    BlockingStreams.gates.put(key, gate);
    int before = runs();
    CountDownLatch closing = new CountDownLatch(1);
    ConfigurableApplicationContext first = start(closing);
    String firstAnswer;
    long closeMillis;
    HttpResponse<byte[]> retry;
    try {
      port = MvcProbes.portOf(first);
      CompletableFuture<HttpResponse<byte[]>> answered = MvcProbes.postAsync(this, path, key);
      Poll.within(Duration.ofSeconds(20))
          .until("the stream began", () -> BlockingStreams.count(BlockingStreams.began, key) == 1);
      firstAnswer = MvcProbes.answerOf(answered); // at the 1 s timeout
      long closeStarted = System.nanoTime();
      CompletableFuture.runAsync(first::close).get(60, TimeUnit.SECONDS);
      closeMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - closeStarted);
      Thread.sleep(2_500); // past the 2 s lease, whatever the close left behind
      retry =
          MvcProbes.replayAfterRestart(
              () -> start(new CountDownLatch(1)), started -> port = started, this, path, key);
    } finally {
      gate.countDown();
    }
    Poll.within(Duration.ofSeconds(30))
        .until(
            "the first stream's send",
            () -> BlockingStreams.count(BlockingStreams.sends, key) >= 1);
    String seen =
        String.format(
            "first answer %s; close took %d ms; after the restart %s; runs %d, sends %d",
            firstAnswer,
            closeMillis,
            MvcProbes.replayed(retry),
            runs() - before,
            BlockingStreams.count(BlockingStreams.sends, key));
    assertThat(closeMillis).as("the guard's close is not hung: " + seen).isLessThan(15_000);
    assertThat(runs() - before).as("handler runs: " + seen).isEqualTo(1);
    assertThat(retry.statusCode()).as(seen).isEqualTo(422);
  }

  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(BlockingStreams.class)
  static class BlockingStreamApplication {}

  /**
   * Streams that, per key, count their start, wait for the key's gate (at most 30 s), then send and
   * write the receipt.
   */
  @RestController
  static class BlockingStreams {
    static final AtomicInteger entered = new AtomicInteger();
    static final Map<String, AtomicInteger> began = new ConcurrentHashMap<>();
    static final Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();
    static final Map<String, CountDownLatch> gates = new ConcurrentHashMap<>();

    static int count(Map<String, AtomicInteger> counts, String key) {
      AtomicInteger n = counts.get(key);
      return n == null ? 0 : n.get();
    }

    private static int bump(Map<String, AtomicInteger> counts, String key) {
      return counts.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
    }

    private static StreamingResponseBody stream(String key) {
      return out -> {
        bump(began, key);
        CountDownLatch gate = gates.getOrDefault(key, new CountDownLatch(0));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (gate.getCount() > 0 && System.nanoTime() < deadline) {
          try {
            gate.await(100, TimeUnit.MILLISECONDS);
          } catch (InterruptedException e) {
            // the provider call goes on
          }
        }
        int n = bump(sends, key);
        out.write(("{\"send\":" + n + "}").getBytes(StandardCharsets.UTF_8));
        out.flush();
      };
    }

    @PostMapping("/probeK/blocking-stream")
    @IdempotentEndpoint
    public ResponseEntity<StreamingResponseBody> blockingStream(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      return ResponseEntity.status(201).contentType(MediaType.APPLICATION_JSON).body(stream(key));
    }

    @PostMapping("/probeK/callable-then-blocking-stream")
    @IdempotentEndpoint
    public Callable<ResponseEntity<StreamingResponseBody>> callableThenBlockingStream(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      return () ->
          ResponseEntity.status(201).contentType(MediaType.APPLICATION_JSON).body(stream(key));
    }
  }
}
