package dev.idempotency.spring.web;

import dev.idempotency.spring.web.TakenOverEmitterRows.Provider;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
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
 * async executor (one thread, held by an unguarded request) at its 500 ms timeout, so the starter
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
 * by the starter itself ({@code EmitterEnd.follow}). The rows' steps and the provider are in {@link
 * TakenOverEmitterRows}.
 */
class MvcTakenOverEmitterProbeTest extends MvcProbeApplication {

  MvcTakenOverEmitterProbeTest() {
    super(
        TakenOverEmitterApplication.class,
        "spring.mvc.async.request-timeout=500ms",
        "spring.task.execution.pool.core-size=1",
        "spring.task.execution.pool.max-size=1",
        "idempotency.close-grace-period=10s");
  }

  @Override
  public int runs() {
    return Emitters.provider.entered.get();
  }

  /** The emitter's work sends: sent once, the retry never sends again. */
  @Test
  void aTakenOverCallablesEmitterThatSendsIsSentOnce() throws Exception {
    TakenOverEmitterRows.takenOverThenRetried(
        this, Emitters.provider, "/probeU/taken-over/emitter-sends");
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
    TakenOverEmitterRows.takenOverThenRetried(
        this, Emitters.provider, "/probeU/taken-over/emitter-refused");
  }

  /**
   * Not taken over: the {@code Callable} runs at once and returns the emitter, whose work is held
   * past the 500 ms timeout of the emitter's own async phase, then refused before any send and
   * ended with that refusal ({@code completeWithError}). Nothing was sent: the retry must send
   * once.
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
    TakenOverEmitterRows.heldThenRetried(
        this, Emitters.provider, "/probeU/on-time/emitter-refused-late");
  }

  /**
   * Detached, not taken over: the {@code Callable} began on time and is still running at the 500 ms
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
    TakenOverEmitterRows.heldThenRetried(
        this, Emitters.provider, "/probeU/detached/emitter-refused");
  }

  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(Emitters.class)
  static class TakenOverEmitterApplication {}

  @RestController
  static class Emitters {
    static final Provider provider = new Provider("probeU");

    @PostMapping("/probeU/taken-over/block")
    public Callable<String> block() {
      return provider.block();
    }

    @PostMapping("/probeU/taken-over/emitter-sends")
    @IdempotentEndpoint
    public Callable<SseEmitter> emitterSends(@RequestHeader("Idempotency-Key") String key) {
      provider.entered.incrementAndGet();
      return () -> provider.emitter(key, false);
    }

    @PostMapping("/probeU/on-time/emitter-refused-late")
    @IdempotentEndpoint
    public Callable<SseEmitter> emitterRefusedLate(@RequestHeader("Idempotency-Key") String key) {
      provider.entered.incrementAndGet();
      return () -> provider.emitter(key, true);
    }

    @PostMapping("/probeU/detached/emitter-refused")
    @IdempotentEndpoint
    public Callable<SseEmitter> emitterRefusedDetached(
        @RequestHeader("Idempotency-Key") String key) {
      provider.entered.incrementAndGet();
      CountDownLatch held = provider.gate();
      return () -> {
        held.await(30, TimeUnit.SECONDS);
        return provider.emitter(key, true);
      };
    }

    @PostMapping("/probeU/taken-over/emitter-refused")
    @IdempotentEndpoint
    public Callable<SseEmitter> emitterRefused(@RequestHeader("Idempotency-Key") String key) {
      provider.entered.incrementAndGet();
      return () -> provider.emitter(key, true);
    }
  }
}
