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
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.servlet.mvc.method.annotation.SseEmitter;

/**
 * probeU: a {@code Callable} whose result is an {@code SseEmitter}, still queued in Spring MVC's
 * async executor (one thread, held by an unguarded request) at its 1 s timeout, so the starter
 * takes it over ({@code UninterruptedWork}) on real Tomcat and a real Redis. The emitter's work
 * calls the provider on a thread of its own: it sends and then sends on the emitter, or the
 * provider refuses (nothing sent) and the work ends the emitter with that refusal ({@code
 * completeWithError}), as docs/spring-boot.md tells an application to. The handler method and the
 * {@code Callable} send nothing. A third row runs the {@code Callable} at once (not taken over) and
 * holds the emitter's work past the timeout of the emitter's own async phase; a fourth runs it at
 * once and holds the {@code Callable} itself past the timeout (detached, not taken over). All four
 * pass on Boot 3.5 and 4.0 (about 50 s with the application's start); the refused rows were open
 * findings, fixed by emitcall: the starter follows an emitter that a {@code Callable} returns to
 * its end, started by Spring MVC ({@code AsyncTimeouts.emitterResult}) or, once its request ended,
 * by the starter itself ({@code EmitterEnd.follow}).
 */
class MvcTakenOverEmitterProbeTest extends MvcProbeApplication {

  MvcTakenOverEmitterProbeTest() {
    super(
        TakenOverEmitterApplication.class,
        "spring.mvc.async.request-timeout=1s",
        "spring.task.execution.pool.core-size=1",
        "spring.task.execution.pool.max-size=1",
        "idempotency.close-grace-period=10s");
  }

  @Override
  public int runs() {
    return Emitters.entered.get();
  }

  /** The emitter's work sends: sent once, the retry never sends again. */
  @Test
  void aTakenOverCallablesEmitterThatSendsIsSentOnce() throws Exception {
    String path = "/probeU/taken-over/emitter-sends";
    String key = EndpointClient.newKey();
    String first = takenOver(path, key);
    HttpResponse<byte[]> last = MvcProbes.retryUntilAnswered(this, path, key);
    String seen = "first answer " + first + ", last " + MvcProbes.replayed(last);
    assertThat(Emitters.sendsOf(key)).as("sends: " + seen).isEqualTo(1);
  }

  /**
   * The emitter's work is refused before it sent and ends the emitter with its own error: nothing
   * was sent, so the key must not be kept as answered (SPEC 1, no lost send); the retry sends once.
   *
   * <p>Was an open finding (medium: a lost send, in a rare shape), fixed by emitcall: the starter
   * now initializes the emitter itself with an observing handler ({@code EmitterEnd.follow}, from
   * {@code AsyncWork.takenOverResult}) and decides by its end ({@code
   * AsyncWork.awaitLaterEmitterEnd}): its own error before any send releases the key. Before:
   * {@code AsyncWork.takenOverResult} records a taken-over work whose result is an emitter as
   * answered without its body as soon as the {@code Callable} returns it ("more async work the
   * starter does not run or follow"), before the emitter's work called the provider; Spring MVC
   * never initialized that emitter, so {@code EmitterEnd} cannot observe it and its {@code
   * completeWithError} is not heard. The retry gets 422 and the notification is never sent within
   * the window. Fails on Boot 3.5 and 4.0 at commit 3bca548 (probeU), in about 22 s: "timed out
   * after 20000 ms waiting for the retry's send: first answer 409 {...request-in-progress...}, last
   * 422 replayed=null {...response-not-stored..., "original-status":200}". A fix would follow the
   * emitter to its end as UninterruptedWork follows a later DeferredResult (initialize it with an
   * observing handler, release on its own error before any send).
   */
  @Test
  void aTakenOverCallablesEmitterRefusedBeforeItSentIsReleased() throws Exception {
    String path = "/probeU/taken-over/emitter-refused";
    String key = EndpointClient.newKey();
    String first = takenOver(path, key);
    HttpResponse<byte[]> last = MvcProbes.retryUntilAnswered(this, path, key);
    String seen = "first answer " + first + ", last " + MvcProbes.replayed(last);
    Poll.within(Duration.ofSeconds(20))
        .until("the retry's send: " + seen, () -> Emitters.sendsOf(key) >= 1);
    assertThat(Emitters.sendsOf(key)).as("sends: " + seen).isEqualTo(1);
  }

  /**
   * Not taken over: the {@code Callable} runs at once and returns the emitter, whose work is held
   * past the 1 s timeout of the emitter's own async phase, then refused before any send and ended
   * with that refusal ({@code completeWithError}). Nothing was sent: the retry must send once.
   *
   * <p>Was an open finding (medium: a lost send), fixed by emitcall: a {@code Callable}'s (or a
   * later stage's) emitter result is registered as the handler's own ({@code
   * AsyncTimeouts.emitterResult}), observed once Spring MVC starts it, and decided at its end when
   * its async phase times out before it sent. Before: the starter observed only an emitter the
   * handler method itself returned ({@code IdempotentEndpointAdvisor} calls {@code
   * AsyncWork.returnsAnEmitter} for the handler's return value, not for a {@code Callable}'s
   * result), so the cut of the emitter's async phase records the key as answered, with Spring MVC's
   * 503, and the work's later {@code completeWithError} is not heard. The retry gets 422
   * (original-status 503) and nothing is ever sent within the window. Fails on Boot 3.5 and 4.0 at
   * commit da4e9db (probeU), in about 22 s: "timed out after 20000 ms waiting for the retry's send:
   * first answer 503 replayed=null {...Service Unavailable...}, last 422 replayed=null
   * {...response-not-stored..., "original-status":503}". A fix would register a {@code Callable}'s
   * emitter result (seen in {@code AsyncWork.lateResult}) as the handler's own emitter, so that its
   * async phase observes it.
   */
  @Test
  void aCallablesEmitterCutByTheTimeoutThenRefusedIsReleased() throws Exception {
    String path = "/probeU/on-time/emitter-refused-late";
    String key = EndpointClient.newKey();
    CountDownLatch gate = new CountDownLatch(1);
    Emitters.gate = gate;
    int called = Emitters.providerCalls.get();
    HttpResponse<byte[]> first;
    try {
      first = post(path, key, "{}");
    } finally {
      gate.countDown();
    }
    Poll.within(Duration.ofSeconds(20))
        .until(
            "the emitter's work called the provider", () -> Emitters.providerCalls.get() > called);
    Emitters.gate = new CountDownLatch(0);
    HttpResponse<byte[]> last = MvcProbes.retryUntilAnswered(this, path, key);
    String seen =
        "first answer " + MvcProbes.replayed(first) + ", last " + MvcProbes.replayed(last);
    Poll.within(Duration.ofSeconds(20))
        .until("the retry's send: " + seen, () -> Emitters.sendsOf(key) >= 1);
    assertThat(Emitters.sendsOf(key)).as("sends: " + seen).isEqualTo(1);
  }

  /**
   * Detached, not taken over: the {@code Callable} began on time and is still running at the 1 s
   * timeout (answered 409, the key claimed); it returns the emitter after that, whose work is then
   * refused before any send and ends it with that refusal. Spring MVC never dispatches that emitter
   * (its request ended): nothing was sent, so the retry must send once.
   *
   * <p>Found and fixed with the two rows above (emitcall; medium: a lost send). Before, the late
   * result, an emitter, was rendered at once into an empty body and stored: the retry got {@code
   * 200} replayed, empty, and nothing was ever sent ("first answer 409 ..., last 200
   * replayed=true"; on Boot 3.5 at 164f714). Now the starter follows the emitter to its end ({@code
   * AsyncWork.lateResult}, {@code EmitterEnd.follow}), as one that a {@code Callable} it took over
   * returned.
   */
  @Test
  void aDetachedCallablesLaterEmitterRefusedBeforeItSentIsReleased() throws Exception {
    String path = "/probeU/detached/emitter-refused";
    String key = EndpointClient.newKey();
    CountDownLatch held = new CountDownLatch(1);
    Emitters.callableGate = held;
    int called = Emitters.providerCalls.get();
    HttpResponse<byte[]> first;
    try {
      first = post(path, key, "{}");
    } finally {
      held.countDown();
    }
    Poll.within(Duration.ofSeconds(20))
        .until(
            "the emitter's work called the provider", () -> Emitters.providerCalls.get() > called);
    HttpResponse<byte[]> last = MvcProbes.retryUntilAnswered(this, path, key);
    String seen =
        "first answer " + MvcProbes.replayed(first) + ", last " + MvcProbes.replayed(last);
    Poll.within(Duration.ofSeconds(20))
        .until("the retry's send: " + seen, () -> Emitters.sendsOf(key) >= 1);
    assertThat(Emitters.sendsOf(key)).as("sends: " + seen).isEqualTo(1);
  }

  /**
   * Posts {@code path} with {@code key} while Spring MVC's executor's only thread is held, until
   * its 1 s timeout took the queued work over and the emitter's work called the provider; then
   * frees the thread. Returns the first answer.
   */
  private String takenOver(String path, String key) throws Exception {
    CountDownLatch release = new CountDownLatch(1);
    Emitters.release = release;
    Emitters.blockStarted = new CountDownLatch(1);
    CompletableFuture<HttpResponse<byte[]>> blocking =
        MvcProbes.postAsync(this, "/probeU/taken-over/block", null);
    assertThat(Emitters.blockStarted.await(30, TimeUnit.SECONDS))
        .as("the blocking task holds the executor's only thread")
        .isTrue();
    try {
      int called = Emitters.providerCalls.get();
      HttpResponse<byte[]> first = post(path, key, "{}");
      Poll.within(Duration.ofSeconds(20))
          .until(
              "the emitter's work called the provider",
              () -> Emitters.providerCalls.get() > called);
      return first.statusCode() + " " + EndpointClient.text(first);
    } finally {
      release.countDown();
      blocking.get(60, TimeUnit.SECONDS);
    }
  }

  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(Emitters.class)
  static class TakenOverEmitterApplication {}

  @RestController
  static class Emitters {
    static final AtomicInteger entered = new AtomicInteger();
    static final AtomicInteger providerCalls = new AtomicInteger();
    static final Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();
    static volatile CountDownLatch blockStarted = new CountDownLatch(1);
    static volatile CountDownLatch release = new CountDownLatch(1);
    static volatile CountDownLatch gate = new CountDownLatch(0);
    static volatile CountDownLatch callableGate = new CountDownLatch(0);

    static int sendsOf(String key) {
      AtomicInteger n = sends.get(key);
      return n == null ? 0 : n.get();
    }

    /** The provider: refuses (nothing sent) the first call of a key if {@code refuse}. */
    private static String provider(String key, boolean refuse) {
      try {
        if (refuse && !sends.containsKey(key)) {
          sends.put(key, new AtomicInteger());
          throw new IllegalStateException("the provider refused; nothing sent");
        }
        return "sent-" + sends.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
      } finally {
        providerCalls.incrementAndGet();
      }
    }

    /** Not guarded: holds the async executor's only thread until the test releases it. */
    @PostMapping("/probeU/taken-over/block")
    public Callable<String> block() {
      CountDownLatch started = blockStarted;
      CountDownLatch held = release;
      return () -> {
        MvcRejectedWorkProbeTest.hold(started, held);
        return "done";
      };
    }

    private static SseEmitter emitter(String key, boolean refuse) {
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
                  id = provider(key, refuse);
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
              "probeU-provider");
      thread.setDaemon(true);
      thread.start();
      return emitter;
    }

    @PostMapping("/probeU/taken-over/emitter-sends")
    @IdempotentEndpoint
    public Callable<SseEmitter> emitterSends(@RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      return () -> emitter(key, false);
    }

    @PostMapping("/probeU/on-time/emitter-refused-late")
    @IdempotentEndpoint
    public Callable<SseEmitter> emitterRefusedLate(@RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      return () -> emitter(key, true);
    }

    @PostMapping("/probeU/detached/emitter-refused")
    @IdempotentEndpoint
    public Callable<SseEmitter> emitterRefusedDetached(
        @RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      CountDownLatch held = callableGate;
      return () -> {
        held.await(30, TimeUnit.SECONDS);
        return emitter(key, true);
      };
    }

    @PostMapping("/probeU/taken-over/emitter-refused")
    @IdempotentEndpoint
    public Callable<SseEmitter> emitterRefused(@RequestHeader("Idempotency-Key") String key) {
      entered.incrementAndGet();
      return () -> emitter(key, true);
    }
  }
}
