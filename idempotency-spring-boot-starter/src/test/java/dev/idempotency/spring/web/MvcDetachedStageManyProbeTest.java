package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.testservers.Poll;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.context.request.async.DeferredResult;

/**
 * probeE, of fixstage (4e0a736f): many handlers' own {@code CompletableFuture}s, each completed by
 * an application thread after the 1 s async timeout with a {@code DeferredResult}, which the
 * starter then awaits on its taken-over pool (at most {@code UninterruptedWork.TAKEN_OVER_THREADS},
 * 32, threads; when all are busy, the continuation runs on the thread that completed the stage).
 * Two probes: a race (stages completed around the moment the timeout fires), and a full pool. Each
 * key must send once at most per SPEC 1, and a refusal before any send must let the retry send
 * once. One application on a real Redis.
 */
class MvcDetachedStageManyProbeTest extends MvcProbeApplication {

  MvcDetachedStageManyProbeTest() {
    super(ManyApplication.class, "spring.mvc.async.request-timeout=1s");
  }

  @Override
  public int runs() {
    return Many.entered.get();
  }

  /**
   * 20 requests at once, each stage completed after a delay of its own (900 ms to 2040 ms, 60 ms
   * apart: around the 1 s timeout, which Tomcat fires within about a second of it) with a {@code
   * DeferredResult} that a later application thread sets 200 ms after it sent. Whichever wins
   * (Spring MVC on time, or the starter after the timeout), each key sends once and its retry gets
   * the send's answer or 422 response-not-stored: never a second send, never an empty 200, never a
   * key left held. Passed on Boot 3.5 and 4.0 at 4de4bf36 (4 to 6 s). Suspected, not confirmed
   * (probeE): in one later run on Boot 3.5, on a machine at a load average of about 60 (the
   * application took 167 s to start), one of the 20 first requests got no answer within the
   * client's 60 s ("HttpTimeoutException: request timed out"), and Tomcat's graceful shutdown at
   * the class's end reported a request still active after 30 s; not reproduced, not explained.
   * Tagged extended until it is: a request left unanswered would be a client left hanging (the
   * key's fate in that run is unknown).
   */
  @Tag("extended")
  @Test
  void stagesCompletedAsTheTimeoutFiresSendOnce() throws Exception {
    Map<String, CompletableFuture<HttpResponse<byte[]>>> firsts = new LinkedHashMap<>();
    for (int round = 0; round < 20; round++) {
      String key = EndpointClient.newKey();
      firsts.put(key, MvcProbes.sendAsync(port(), "/probeE/race/" + (900 + 60 * round), key));
    }
    List<String> wrong = new ArrayList<>();
    List<String> seen = new ArrayList<>();
    int round = 0;
    for (Map.Entry<String, CompletableFuture<HttpResponse<byte[]>>> entry : firsts.entrySet()) {
      String key = entry.getKey();
      String path = "/probeE/race/" + (900 + 60 * round++);
      HttpResponse<byte[]> first = entry.getValue().get(60, TimeUnit.SECONDS);
      Poll.within(Duration.ofSeconds(20))
          .until("the send of " + path, () -> Many.sendsOf(key) >= 1);
      HttpResponse<byte[]> last = MvcProbes.retryUntilAnswered(this, path, key);
      String row =
          path
              + ": first "
              + MvcProbes.replayed(first)
              + ", last "
              + MvcProbes.replayed(last)
              + ", sends "
              + Many.sendsOf(key);
      seen.add(row);
      boolean answered =
          (last.statusCode() == 200 && EndpointClient.text(last).equals("sent-1"))
              || (last.statusCode() == 422
                  && EndpointClient.text(last).contains("response-not-stored"));
      if (Many.sendsOf(key) != 1 || !answered) {
        wrong.add(row);
      }
    }
    assertThat(wrong).as("all rounds: " + seen).isEmpty();
  }

  /**
   * 40 requests at once, each stage completed after the timeout (all 40 answered 409) by an
   * application thread of its own with a {@code DeferredResult} (8 s timeout) that the same thread
   * sets later with the provider's refusal, before any send ({@code setErrorResult}): nothing was
   * sent, so each retry must send once (SPEC 1: no lost send). 32 awaits fill the starter's pool;
   * the others must not be awaited on the application's thread that completed the stage (it would
   * block in {@code complete} until the wait expires, then the refusal comes too late to be heard).
   *
   * <p>Was an open finding (probeE, of fixstage 4e0a736f; a lost send, SPEC 1). Failed on Boot 3.5
   * and 4.0 at 4de4bf36 (about 10 s): "keys not sent once (8 of 40 stages' complete() still blocked
   * 5 s after) ... [<key>: last 422 replayed=null {...response-not-stored...,
   * "original-status":200}, sends 0, ...]": the 32 continuations on the starter's pool released
   * their keys and the retries sent once; the other 8 ran on the application's thread inside {@code
   * stage.complete} (the pool's caller-runs fallback, {@code DetachedWork.onATakenOverThread}),
   * which awaited the DeferredResult that only that thread would set until its 8 s timeout,
   * recorded the call as answered without its body, and only then let the thread hear the refusal:
   * nothing was ever sent, and the retry gets 422. Fixed (fixctx): a continuation that finds the
   * taken-over pool full runs on a thread of the starter's shielded work pool, never on the thread
   * that completed the stage ({@code DetachedWork.NeverOnTheCaller}).
   */
  @Test
  void aFullPoolOfDetachedStagesLosesNoSend() throws Exception {
    int requests = 40;
    CountDownLatch allAnswered = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    Many.allAnswered = allAnswered;
    Many.release = release;
    Many.completeReturned.clear();
    List<String> keys = new ArrayList<>();
    List<CompletableFuture<HttpResponse<byte[]>>> firsts = new ArrayList<>();
    int stillBlocked;
    try {
      for (int i = 0; i < requests; i++) {
        String key = EndpointClient.newKey();
        keys.add(key);
        firsts.add(MvcProbes.sendAsync(port(), "/probeE/pool", key));
      }
      for (CompletableFuture<HttpResponse<byte[]>> first : firsts) {
        assertThat(first.get(60, TimeUnit.SECONDS).statusCode()).isEqualTo(409);
      }
      allAnswered.countDown(); // every application thread completes its stage now
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
      while (Many.completeReturned.size() < requests && System.nanoTime() < deadline) {
        Thread.sleep(20);
      }
      stillBlocked = requests - Many.completeReturned.size();
    } finally {
      allAnswered.countDown();
      release.countDown(); // the provider refuses each key's first call: nothing sent
    }
    List<String> lost = new ArrayList<>();
    for (String key : keys) {
      Poll.within(Duration.ofSeconds(30))
          .until("the refusal of " + key, () -> Many.calls.containsKey(key));
      HttpResponse<byte[]> last = MvcProbes.retryUntilAnswered(this, "/probeE/pool", key);
      if (Many.sendsOf(key) != 1) {
        lost.add(key + ": last " + MvcProbes.replayed(last) + ", sends " + Many.sendsOf(key));
      }
    }
    assertThat(lost)
        .as(
            "keys not sent once (%d of %d stages' complete() still blocked 5 s after)",
            stillBlocked, requests)
        .isEmpty();
    assertThat(stillBlocked)
        .as("application threads blocked in complete() 5 s after they completed their stages")
        .isZero();
  }

  /**
   * A late value nothing settles: the stage completed after the 1 s timeout with a {@code
   * DeferredResult} that nothing ever sets (no timeout of its own, no timeout result). The starter
   * awaits it 30 s (docs/spring-boot.md: the request's async timeout is not read there), then
   * expires it: the call is recorded as answered without its body. Meanwhile every retry must get
   * 409 with Retry-After (the key held, renewed), and after it 422 response-not-stored: never the
   * handler run again, never an empty 200, and the key never left held.
   */
  @Tag("extended")
  @Test
  void aDetachedStagesUnsetDeferredResultHoldsTheKeyUntilItExpires() throws Exception {
    String key = EndpointClient.newKey();
    String path = "/probeE/unset";
    CountDownLatch answered = new CountDownLatch(1);
    Many.allAnswered = answered;
    HttpResponse<byte[]> first;
    try {
      first = post(path, key, "{}");
    } finally {
      answered.countDown(); // the stage completes now, after the timeout
    }
    long started = System.nanoTime();
    int runs = Many.entered.get();
    HttpResponse<byte[]> retry;
    List<String> without = new ArrayList<>();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    do {
      Thread.sleep(500);
      retry = post(path, key, "{}");
      if (retry.statusCode() == 409 && EndpointClient.header(retry, "Retry-After") == null) {
        without.add(MvcProbes.replayed(retry));
      }
    } while (retry.statusCode() == 409 && System.nanoTime() < deadline);
    long heldMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);
    String seen =
        "first "
            + MvcProbes.replayed(first)
            + ", after "
            + heldMillis
            + " ms: "
            + MvcProbes.replayed(retry)
            + ", handler runs since "
            + (Many.entered.get() - runs);
    assertThat(first.statusCode()).as(seen).isEqualTo(409);
    assertThat(retry.statusCode()).as(seen).isEqualTo(422);
    assertThat(EndpointClient.text(retry)).as(seen).contains("response-not-stored");
    assertThat(Many.entered.get()).as("the handler ran again: " + seen).isEqualTo(runs);
    assertThat(without).as("409s without Retry-After").isEmpty();
    assertThat(heldMillis).as(seen).isBetween(25_000L, 45_000L);
  }

  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(Many.class)
  static class ManyApplication {}

  @RestController
  static class Many {
    static final AtomicInteger entered = new AtomicInteger();
    static final Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();

    /** Keys whose provider was called at least once (the first call is refused, nothing sent). */
    static final Map<String, Boolean> calls = new ConcurrentHashMap<>();

    static final Set<String> completeReturned = ConcurrentHashMap.newKeySet();
    static volatile CountDownLatch allAnswered = new CountDownLatch(0);
    static volatile CountDownLatch release = new CountDownLatch(0);

    static int sendsOf(String key) {
      AtomicInteger n = sends.get(key);
      return n == null ? 0 : n.get();
    }

    private static int send(String key) {
      return sends.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
    }

    /**
     * Completes the stage after {@code delay} ms with a DeferredResult that a later thread sets,
     * 200 ms after it sent.
     */
    @PostMapping("/probeE/race/{delay}")
    @IdempotentEndpoint
    public CompletableFuture<DeferredResult<String>> race(
        @PathVariable("delay") long delay, @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      CompletableFuture<DeferredResult<String>> stage = new CompletableFuture<>();
      daemon(
          () -> {
            sleep(delay);
            DeferredResult<String> deferred = new DeferredResult<>();
            stage.complete(deferred);
            daemon(
                () -> {
                  int n = send(key);
                  sleep(200);
                  deferred.setResult("sent-" + n);
                });
          });
      return stage;
    }

    /**
     * Completes the stage once every first request was answered, with a DeferredResult (8 s) that
     * this same thread sets once released: the provider refuses the key's first call (nothing
     * sent), {@code setErrorResult}; a later call sends.
     */
    @PostMapping("/probeE/pool")
    @IdempotentEndpoint
    public CompletableFuture<DeferredResult<String>> pool(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      CompletableFuture<DeferredResult<String>> stage = new CompletableFuture<>();
      CountDownLatch answered = allAnswered;
      CountDownLatch released = release;
      daemon(
          () -> {
            await(answered);
            DeferredResult<String> deferred = new DeferredResult<>(8_000L);
            stage.complete(deferred); // the starter's continuation: must not run here
            completeReturned.add(key);
            await(released);
            if (calls.putIfAbsent(key, true) == null) {
              deferred.setErrorResult(
                  new IllegalStateException("the provider refused; nothing sent"));
            } else {
              deferred.setResult("sent-" + send(key));
            }
          });
      return stage;
    }

    /**
     * Completes the stage once the first answer came (after the timeout) with a DeferredResult
     * nothing sets.
     */
    @PostMapping("/probeE/unset")
    @IdempotentEndpoint
    public CompletableFuture<DeferredResult<String>> unset() {
      entered.incrementAndGet();
      CompletableFuture<DeferredResult<String>> stage = new CompletableFuture<>();
      CountDownLatch answered = allAnswered;
      daemon(
          () -> {
            await(answered);
            stage.complete(new DeferredResult<>());
          });
      return stage;
    }

    private static void daemon(Runnable run) {
      Thread thread = new Thread(run, "probeE-app");
      thread.setDaemon(true);
      thread.start();
    }

    private static void sleep(long millis) {
      try {
        Thread.sleep(millis);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }

    private static void await(CountDownLatch latch) {
      try {
        latch.await(30, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }
}
