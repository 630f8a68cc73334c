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
import org.springframework.web.servlet.mvc.method.annotation.SseEmitter;

/**
 * What MvcTakenOverEmitterProbeTest and MvcTakenOverEmitterShapesProbeTest share: the provider of
 * their applications ({@link Provider}, one per controller), and their rows' steps. A row posts a
 * key to an idempotent endpoint whose {@code Callable} is either queued behind a task that holds
 * Spring MVC's executor's only thread, so that the timeout takes it over ({@link
 * #takenOverThenRetried}), or held itself past that timeout ({@link #heldThenRetried}); then, once
 * the work called the provider, the client retries until answered and the provider must have sent
 * exactly once (SPEC 1: no lost send, no second send).
 *
 * <p>A timeout of 500 ms, not 1 s, where no row needs more (issue 37): Tomcat looks for expired
 * async requests once a second, so a 1 s timeout fires 1 to 2 s after the request (about 2 s a row,
 * each row starting just after the previous row's timeout), and 500 ms at the next look, about 1 s.
 * The work is held by latches until the client has the timeout's answer, so the timeout comes
 * whatever the machine's speed. MvcTakenOverEmitterShapesProbeTest keeps 1 s: its later {@code
 * DeferredResult}s, set 200 ms after their {@code Callable} returned, expire at the request's
 * timeout, and 500 ms would race with that 200 ms on a busy machine.
 */
final class TakenOverEmitterRows {

  private TakenOverEmitterRows() {}

  /**
   * The provider of a probe application, and the gates its endpoints wait on; a controller keeps
   * one in a static field, read by its endpoints and by the test.
   */
  static final class Provider {
    /** Runs of the guarded handler methods. */
    final AtomicInteger entered = new AtomicInteger();

    /** Calls of the provider, sent or refused. */
    final AtomicInteger calls = new AtomicInteger();

    private final Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();
    private final String prefix;
    private volatile CountDownLatch blockStarted = new CountDownLatch(1);
    private volatile CountDownLatch release = new CountDownLatch(1);
    private volatile CountDownLatch gate = new CountDownLatch(0);

    /**
     * @param prefix the first segment of the application's paths and the name of its threads, such
     *     as {@code "probeU"}: its blocking endpoint is {@code /<prefix>/taken-over/block}
     */
    Provider(String prefix) {
      this.prefix = prefix;
    }

    /** The path of the endpoint {@link #block()} serves. */
    String blockPath() {
      return "/" + prefix + "/taken-over/block";
    }

    /** How many times the provider sent for {@code key}. */
    int sendsOf(String key) {
      AtomicInteger n = sends.get(key);
      return n == null ? 0 : n.get();
    }

    /** The provider: refuses (nothing sent) the first call of a key if {@code refuse}. */
    String call(String key, boolean refuse) {
      try {
        if (refuse && !sends.containsKey(key)) {
          sends.put(key, new AtomicInteger());
          throw new IllegalStateException("the provider refused; nothing sent");
        }
        return "sent-" + sends.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
      } finally {
        calls.incrementAndGet();
      }
    }

    /** Not guarded: holds the async executor's only thread until the test releases it. */
    Callable<String> block() {
      CountDownLatch started = blockStarted;
      CountDownLatch held = release;
      return () -> {
        MvcRejectedWorkProbeTest.hold(started, held);
        return "done";
      };
    }

    /**
     * The gate a row holds the work with: a {@code Callable} waits on it (at most 30 s), and the
     * work of an emitter made meanwhile. Open unless a row holds it; read it when the handler runs.
     */
    CountDownLatch gate() {
      return gate;
    }

    /**
     * An emitter whose work, on a thread of its own, waits for the gate, calls the provider and
     * sends its answer on the emitter; or, refused, ends the emitter with the refusal ({@code
     * completeWithError}), as docs/spring-boot.md tells an application to.
     */
    SseEmitter emitter(String key, boolean refuse) {
      SseEmitter emitter = new SseEmitter();
      CountDownLatch held = gate;
      Thread thread =
          new Thread(
              () -> {
                String id;
                try {
                  held.await(30, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                  Thread.currentThread().interrupt();
                }
                try {
                  id = call(key, refuse);
                } catch (IllegalStateException refused) {
                  emitter.completeWithError(refused);
                  return;
                }
                try {
                  emitter.send(SseEmitter.event().data(id));
                  emitter.complete();
                } catch (Exception e) {
                  emitter.completeWithError(e);
                }
              },
              prefix + "-provider");
      thread.setDaemon(true);
      thread.start();
      return emitter;
    }
  }

  /**
   * Posts {@code path} with a new key while Spring MVC's executor's only thread is held, until its
   * timeout took the queued work over and the work called the provider; then frees the thread,
   * retries and checks that the provider sent once.
   */
  static void takenOverThenRetried(MvcProbeApplication app, Provider provider, String path)
      throws Exception {
    String key = EndpointClient.newKey();
    CountDownLatch release = new CountDownLatch(1);
    provider.release = release;
    provider.blockStarted = new CountDownLatch(1);
    CompletableFuture<HttpResponse<byte[]>> blocking =
        MvcProbes.postAsync(app, provider.blockPath(), null);
    assertThat(provider.blockStarted.await(30, TimeUnit.SECONDS))
        .as("the blocking task holds the executor's only thread")
        .isTrue();
    String first;
    try {
      int called = provider.calls.get();
      HttpResponse<byte[]> answer = app.post(path, key, "{}");
      awaitProviderCall(provider, called);
      first = answer.statusCode() + " " + EndpointClient.text(answer);
    } finally {
      release.countDown();
      blocking.get(60, TimeUnit.SECONDS);
    }
    retriedSendsOnce(app, provider, path, key, first);
  }

  /**
   * Posts {@code path} with a new key while the provider's gate holds the work (past the timeout,
   * since the first answer comes only then), opens it, waits until the work called the provider,
   * retries and checks that the provider sent once.
   */
  static void heldThenRetried(MvcProbeApplication app, Provider provider, String path)
      throws Exception {
    String key = EndpointClient.newKey();
    CountDownLatch held = new CountDownLatch(1);
    provider.gate = held;
    int called = provider.calls.get();
    HttpResponse<byte[]> first;
    try {
      first = app.post(path, key, "{}");
    } finally {
      held.countDown();
    }
    awaitProviderCall(provider, called);
    retriedSendsOnce(app, provider, path, key, MvcProbes.replayed(first));
  }

  /** What {@link #heldThenAnswered} saw: the row's key, its first answer and its last. */
  record Answered(String key, String first, HttpResponse<byte[]> last) {
    /** Both answers, for an assertion's message. */
    String seen() {
      return "first answer " + first + ", last " + MvcProbes.replayed(last);
    }
  }

  /**
   * Posts {@code path} with a new key while the provider's gate holds the work (past the timeout,
   * since the first answer comes only then), opens it, and retries while the answer is 409 or 503
   * (20 s at most): the key and the answers, for the row to check.
   */
  static Answered heldThenAnswered(MvcProbeApplication app, Provider provider, String path)
      throws Exception {
    String key = EndpointClient.newKey();
    CountDownLatch held = new CountDownLatch(1);
    provider.gate = held;
    HttpResponse<byte[]> first;
    try {
      first = app.post(path, key, "{}");
    } finally {
      held.countDown();
    }
    HttpResponse<byte[]> last = MvcProbes.retryUntilAnswered(app, path, key);
    return new Answered(key, MvcProbes.replayed(first), last);
  }

  private static void awaitProviderCall(Provider provider, int before) throws Exception {
    Poll.within(Duration.ofSeconds(20))
        .until("the work called the provider", () -> provider.calls.get() > before);
  }

  private static void retriedSendsOnce(
      MvcProbeApplication app, Provider provider, String path, String key, String first)
      throws Exception {
    HttpResponse<byte[]> last = MvcProbes.retryUntilAnswered(app, path, key);
    String seen = "first answer " + first + ", last " + MvcProbes.replayed(last);
    Poll.within(Duration.ofSeconds(20))
        .until("the retry's send: " + seen, () -> provider.sendsOf(key) >= 1);
    assertThat(provider.sendsOf(key)).as("sends: " + seen).isEqualTo(1);
  }
}
