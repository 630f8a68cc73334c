package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.context.request.async.DeferredResult;
import org.springframework.web.servlet.mvc.method.annotation.StreamingResponseBody;

/**
 * Probe (probeM) of fixqueue (85e251d): a taken-over {@code Callable} whose result is more async
 * work that the starter does not run itself. A {@code Callable} queued in Spring MVC's async
 * executor (one thread, held by an unguarded request) at its 1 s timeout is taken over; its result
 * is a {@code DeferredResult} or a {@code CompletableFuture} that an application thread completes:
 * after a send, or with a failure before any send (the provider refused). The handler method sends
 * nothing. One application on a real Redis (Spring Data Redis's Lettuce connection).
 */
class MvcTakenOverLaterStageProbeTest extends MvcProbeApplication {

  MvcTakenOverLaterStageProbeTest() {
    super(
        LaterStageApplication.class,
        "spring.mvc.async.request-timeout=1s",
        "spring.task.execution.pool.core-size=1",
        "spring.task.execution.pool.max-size=1",
        "idempotency.http.max-response-size=1KB");
  }

  @Override
  public int runs() {
    return LaterStages.entered.get();
  }

  /**
   * A later stage that sends: sent once, and the retry never sends again (a replay of its 201, or
   * 422 response-not-stored, as docs/spring-boot.md says of a later {@code DeferredResult}).
   */
  @ParameterizedTest
  @ValueSource(strings = {"/probeM/later/deferred-sends", "/probeM/later/future-sends"})
  void aLaterStageThatSendsIsSentOnce(String path) throws Exception {
    String key = EndpointClient.newKey();
    String first = takenOver(path, key);
    HttpResponse<byte[]> last = MvcProbes.retryWhileInProgress(this, path, key);
    String seen = "first answer " + first + ", last " + MvcProbes.replayed(last);
    assertThat(LaterStages.sendsOf(key)).as("sends: " + seen).isEqualTo(1);
    assertThat(last.statusCode()).as("the retry: " + seen).isIn(201, 422);
  }

  /**
   * A {@code CompletableFuture} later stage that fails before it sent (the provider refused):
   * awaited, its failure released (nothing maps it), the retry sends once.
   */
  @Test
  void aLaterFutureThatFailsBeforeItSentIsReleased() throws Exception {
    String path = "/probeM/later/future-fails";
    String key = EndpointClient.newKey();
    String first = takenOver(path, key);
    HttpResponse<byte[]> last = MvcProbes.retryWhileInProgress(this, path, key);
    String seen = "first answer " + first + ", last " + MvcProbes.replayed(last);
    assertThat(last.statusCode()).as("the retry: " + seen).isEqualTo(201);
    assertThat(LaterStages.sendsOf(key)).as("sends: " + seen).isEqualTo(1);
  }

  /**
   * Was an open finding (low-medium, a lost send; SPEC 1 "no lost send"), fixed by following a
   * later {@code DeferredResult} of taken-over work to its result ({@code
   * LaterStages.awaitDeferred}), as a {@code CompletableFuture} is: the same with a {@code
   * DeferredResult} whose provider refused before it sent ({@code setErrorResult}). The taken-over
   * work did not follow the {@code DeferredResult}: the key was recorded as answered without its
   * body as soon as the {@code Callable} returned it, before the provider was even called, and the
   * retry got 422, so the message was never sent within the window. Failed on Boot 3.5 and 4.0,
   * commit feb9e77 (and again on 5cfa0b8): "the retry: first answer 409
   * {...request-in-progress...}, last 422 replayed=null
   * {"type":"/problems/response-not-stored",...,"original-status":200} expected: 201 but was: 422"
   * (about 2 s). Its failure now goes through the exception resolvers as the first stage's would
   * (nothing maps it: the key is released) and the retry sends once.
   */
  @Test
  void aLaterDeferredResultThatFailsBeforeItSentIsReleased() throws Exception {
    String path = "/probeM/later/deferred-fails";
    String key = EndpointClient.newKey();
    String first = takenOver(path, key);
    HttpResponse<byte[]> last = MvcProbes.retryWhileInProgress(this, path, key);
    String seen = "first answer " + first + ", last " + MvcProbes.replayed(last);
    assertThat(last.statusCode()).as("the retry: " + seen).isEqualTo(201);
    assertThat(LaterStages.sendsOf(key)).as("sends: " + seen).isEqualTo(1);
  }

  /**
   * Probe (fixdeferred) of emitcall's suspicion: a taken-over {@code Callable} that sends, then
   * returns a {@code Callable} (a later stage) that fails. The later stage ran after a stage that
   * sent, so its failure is recorded as answered without its body ({@code
   * AsyncWork.takenOverResult}): the retry gets 422 response-not-stored, never a second send.
   * Failed before the fix (UninterruptedWork marked a later stage as run only once it ended, so its
   * failure was taken for the first stage's and released, and the retry sent again): "sends: first
   * answer 409 {...request-in-progress...}, last 500 replayed=null {...} expected: 1 but was: 2"
   * (Boot 3.5).
   */
  @Test
  void aLaterCallableThatFailsAfterTheFirstStageSentIsNotSentAgain() throws Exception {
    String path = "/probeM/later/callable-then-callable-fails";
    String key = EndpointClient.newKey();
    String first = takenOver(path, key);
    HttpResponse<byte[]> last = MvcProbes.retryWhileInProgress(this, path, key);
    String seen = "first answer " + first + ", last " + MvcProbes.replayed(last);
    assertThat(LaterStages.sendsOf(key)).as("sends: " + seen).isEqualTo(1);
    assertThat(last.statusCode()).as("the retry: " + seen).isEqualTo(422);
  }

  /**
   * A queued {@code StreamingResponseBody} taken over, which sends, then writes {@code size} bytes
   * in 100-byte writes (then fails, for a negative size) against the 1 KB bound of a stored
   * response: exactly the bound is stored and replayed byte for byte; one byte past it, or a
   * failure after it wrote, is recorded as answered without its body (422); sent once in every
   * case.
   */
  @ParameterizedTest
  @ValueSource(ints = {1024, 1025, -1024})
  void aTakenOverStreamNearItsBoundIsSentOnce(int size) throws Exception {
    String path = "/probeM/later/stream?size=" + size;
    String key = EndpointClient.newKey();
    String first = takenOver(path, key);
    HttpResponse<byte[]> last = MvcProbes.retryWhileInProgress(this, path, key);
    String seen =
        "first answer "
            + first
            + ", last "
            + last.statusCode()
            + " replayed="
            + EndpointClient.header(last, IdempotentEndpointInterceptor.REPLAYED_HEADER)
            + " body "
            + last.body().length
            + " bytes";
    assertThat(LaterStages.sendsOf(key)).as("sends: " + seen).isEqualTo(1);
    if (size == 1024) {
      assertThat(last.statusCode()).as("the retry: " + seen).isEqualTo(201);
      assertThat(last.body()).as("the replayed body: " + seen).isEqualTo(LaterStages.body(1024));
    } else {
      assertThat(last.statusCode()).as("the retry: " + seen).isEqualTo(422);
    }
  }

  /**
   * On time (nothing queued, no timeout): a {@code Callable} that sends, then returns a {@code
   * StreamingResponseBody} (Spring MVC's later stage, decided as the handler's own stream since
   * fixlater) that writes {@code size} bytes in 100-byte writes against the 1 KB bound: exactly the
   * bound is stored and replayed byte for byte, one byte past it is answered in full and recorded
   * without its body (422); sent once either way. Passes on Boot 3.5 and 4.0 (under 1 s per row).
   */
  @ParameterizedTest
  @ValueSource(ints = {1024, 1025})
  void aLaterStreamOnTimeNearItsBoundIsSentOnce(int size) throws Exception {
    String path = "/probeM/later/callable-then-stream?size=" + size;
    String key = EndpointClient.newKey();
    HttpResponse<byte[]> first = post(path, key, "{}");
    HttpResponse<byte[]> last = MvcProbes.retryWhileInProgress(this, path, key);
    String seen = laterStreamSeen(first, last);
    assertThat(first.statusCode()).as("the first answer: " + seen).isEqualTo(201);
    assertThat(first.body()).as("the first body: " + seen).isEqualTo(LaterStages.body(size));
    assertThat(LaterStages.sendsOf(key)).as("sends: " + seen).isEqualTo(1);
    if (size == 1024) {
      assertThat(last.statusCode()).as("the retry: " + seen).isEqualTo(201);
      assertThat(last.body()).as("the replayed body: " + seen).isEqualTo(LaterStages.body(1024));
    } else {
      assertThat(last.statusCode()).as("the retry: " + seen).isEqualTo(422);
    }
  }

  private static String laterStreamSeen(HttpResponse<byte[]> first, HttpResponse<byte[]> last) {
    return "first "
        + first.statusCode()
        + " body "
        + first.body().length
        + " bytes; last "
        + last.statusCode()
        + " replayed="
        + EndpointClient.header(last, IdempotentEndpointInterceptor.REPLAYED_HEADER)
        + " body "
        + last.body().length
        + " bytes";
  }

  /**
   * Posts {@code path} with {@code key} while Spring MVC's executor's only thread is held, until
   * its 1 s timeout took the queued work over and its later stage called the provider; then frees
   * the thread. Returns the first answer. (The retries after it repeat while 409: the later stage's
   * end may not have been recorded yet.)
   */
  private String takenOver(String path, String key) throws Exception {
    CountDownLatch release = new CountDownLatch(1);
    LaterStages.release = release;
    LaterStages.blockStarted = new CountDownLatch(1);
    CompletableFuture<HttpResponse<byte[]>> blocking =
        MvcProbes.postAsync(this, "/probeM/later/block", null);
    assertThat(LaterStages.blockStarted.await(30, TimeUnit.SECONDS))
        .as("the blocking task holds the executor's only thread")
        .isTrue();
    try {
      int called = LaterStages.providerCalls.get();
      HttpResponse<byte[]> first = post(path, key, "{}");
      long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
      while (LaterStages.providerCalls.get() == called && System.nanoTime() < deadline) {
        Thread.sleep(10);
      }
      assertThat(LaterStages.providerCalls.get()).as("the later stage ran").isGreaterThan(called);
      return first.statusCode() + " " + EndpointClient.text(first);
    } finally {
      release.countDown();
      blocking.get(60, TimeUnit.SECONDS);
    }
  }

  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(LaterStages.class)
  static class LaterStageApplication {}

  @RestController
  static class LaterStages {
    static final AtomicInteger entered = new AtomicInteger();
    static final AtomicInteger providerCalls = new AtomicInteger();
    static final Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();
    static volatile CountDownLatch blockStarted = new CountDownLatch(1);
    static volatile CountDownLatch release = new CountDownLatch(1);

    static int sendsOf(String key) {
      AtomicInteger n = sends.get(key);
      return n == null ? 0 : n.get();
    }

    /** The provider: refuses (nothing sent) the first call of a key if {@code refuse}. */
    private static ResponseEntity<Map<String, Object>> provider(String key, boolean refuse) {
      try {
        if (refuse && !sends.containsKey(key)) {
          sends.put(key, new AtomicInteger());
          throw new IllegalStateException("the provider refused; nothing sent");
        }
        int n = sends.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
        return ResponseEntity.status(201).body(Map.of("send", n));
      } finally {
        providerCalls.incrementAndGet();
      }
    }

    private static void onAThreadOfItsOwn(Runnable provider) {
      Thread thread = new Thread(provider, "probeM-provider");
      thread.setDaemon(true);
      thread.start();
    }

    /** Not guarded: holds the async executor's only thread until the test releases it. */
    @PostMapping("/probeM/later/block")
    public Callable<String> block() {
      CountDownLatch started = blockStarted;
      CountDownLatch held = release;
      return () -> {
        MvcRejectedWorkProbeTest.hold(started, held);
        return "done";
      };
    }

    private static DeferredResult<ResponseEntity<Map<String, Object>>> deferred(
        String key, boolean refuse) {
      DeferredResult<ResponseEntity<Map<String, Object>>> result = new DeferredResult<>();
      onAThreadOfItsOwn(
          () -> {
            try {
              result.setResult(provider(key, refuse));
            } catch (RuntimeException e) {
              result.setErrorResult(e);
            }
          });
      return result;
    }

    private static CompletableFuture<ResponseEntity<Map<String, Object>>> future(
        String key, boolean refuse) {
      CompletableFuture<ResponseEntity<Map<String, Object>>> result = new CompletableFuture<>();
      onAThreadOfItsOwn(
          () -> {
            try {
              result.complete(provider(key, refuse));
            } catch (RuntimeException e) {
              result.completeExceptionally(e);
            }
          });
      return result;
    }

    static byte[] body(int size) {
      byte[] body = new byte[size];
      for (int i = 0; i < size; i++) {
        body[i] = (byte) ('a' + i % 26);
      }
      return body;
    }

    /** Sends in its stream, then writes {@code |size|} bytes; fails after that if negative. */
    @PostMapping("/probeM/later/stream")
    @IdempotentEndpoint
    public ResponseEntity<StreamingResponseBody> stream(
        @RequestHeader("Idempotency-Key") String key, @RequestParam("size") int size) {
      entered.incrementAndGet();
      byte[] body = body(Math.abs(size));
      return ResponseEntity.status(201)
          .contentType(MediaType.TEXT_PLAIN)
          .body(
              out -> {
                provider(key, false);
                for (int off = 0; off < body.length; off += 100) {
                  out.write(body, off, Math.min(100, body.length - off));
                }
                if (size < 0) {
                  throw new IllegalStateException("the stream failed after it wrote");
                }
              });
    }

    /**
     * Sends in its Callable, then streams {@code |size|} bytes as a later stage; fails after that
     * if negative (not probed here: a failing last stage releases the key by the documented rule,
     * and the retry runs the first stage again).
     */
    @PostMapping("/probeM/later/callable-then-stream")
    @IdempotentEndpoint
    public Callable<ResponseEntity<StreamingResponseBody>> callableThenStream(
        @RequestHeader("Idempotency-Key") String key, @RequestParam("size") int size) {
      entered.incrementAndGet();
      byte[] body = body(Math.abs(size));
      return () -> {
        provider(key, false);
        return ResponseEntity.status(201)
            .contentType(MediaType.TEXT_PLAIN)
            .body(
                out -> {
                  for (int off = 0; off < body.length; off += 100) {
                    out.write(body, off, Math.min(100, body.length - off));
                  }
                  if (size < 0) {
                    out.flush();
                    throw new IllegalStateException("the stream failed after it wrote");
                  }
                });
      };
    }

    /** Sends in its Callable, then returns a Callable (a later stage) that fails. */
    @PostMapping("/probeM/later/callable-then-callable-fails")
    @IdempotentEndpoint
    public Callable<Callable<ResponseEntity<Map<String, Object>>>> callableThenCallableFails(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      return () -> {
        provider(key, false);
        return () -> {
          throw new IllegalStateException("the later stage failed after the first one sent");
        };
      };
    }

    @PostMapping("/probeM/later/deferred-sends")
    @IdempotentEndpoint
    public Callable<DeferredResult<ResponseEntity<Map<String, Object>>>> deferredSends(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      return () -> deferred(key, false);
    }

    @PostMapping("/probeM/later/deferred-fails")
    @IdempotentEndpoint
    public Callable<DeferredResult<ResponseEntity<Map<String, Object>>>> deferredFails(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      return () -> deferred(key, true);
    }

    @PostMapping("/probeM/later/future-sends")
    @IdempotentEndpoint
    public Callable<CompletableFuture<ResponseEntity<Map<String, Object>>>> futureSends(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      return () -> future(key, false);
    }

    @PostMapping("/probeM/later/future-fails")
    @IdempotentEndpoint
    public Callable<CompletableFuture<ResponseEntity<Map<String, Object>>>> futureFails(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      return () -> future(key, true);
    }
  }
}
