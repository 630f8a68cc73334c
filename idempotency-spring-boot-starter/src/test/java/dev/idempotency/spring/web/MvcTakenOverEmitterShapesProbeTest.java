package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.web.TakenOverEmitterRows.Answered;
import dev.idempotency.spring.web.TakenOverEmitterRows.Provider;
import dev.idempotency.testservers.Poll;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.slf4j.MDC;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.context.request.RequestAttributes;
import org.springframework.web.context.request.RequestContextHolder;
import org.springframework.web.context.request.async.DeferredResult;
import org.springframework.web.servlet.mvc.method.annotation.SseEmitter;

/**
 * probeX, of emitcall (f6a21d7, 865a49f): shapes of a taken-over {@code Callable}'s emitter that
 * MvcTakenOverEmitterProbeTest does not reach: the emitter in a {@code ResponseEntity} (headers
 * taken over), and in a {@code DeferredResult} (or a {@code CompletableFuture}) the {@code
 * Callable} returns already set. In each, the emitter's work is refused before it sent and ends the
 * emitter with that refusal ({@code completeWithError}): nothing was sent, so the retry must send
 * once (SPEC 1, no lost send). Spring MVC's executor's only thread is held so that the {@code
 * Callable} is queued and taken over at the 1 s timeout. One application on a real Redis. A fourth
 * row holds a {@code Callable} past the timeout instead (detached, not taken over). All four pass
 * on Boot 3.5 and 4.0 since emshapes. The rows after them (emshapes, fixlater) hold a {@code
 * Callable} past the timeout too, and it returns, after it, a later stage that an application
 * thread completes later (a {@code DeferredResult}, a {@code CompletableFuture}) or that nothing
 * completes: awaited by the starter since fixlater. The rows' steps and the provider are in {@link
 * TakenOverEmitterRows}.
 */
class MvcTakenOverEmitterShapesProbeTest extends MvcProbeApplication {

  MvcTakenOverEmitterShapesProbeTest() {
    super(
        ShapesApplication.class,
        "spring.mvc.async.request-timeout=1s",
        "spring.task.execution.pool.core-size=1",
        "spring.task.execution.pool.max-size=1",
        "idempotency.close-grace-period=10s");
  }

  @Override
  public int runs() {
    return Shapes.provider.entered.get();
  }

  /** A {@code ResponseEntity} of an emitter, its header set: passes on Boot 3.5 and 4.0. */
  @Test
  void aTakenOverEntityOfAnEmitterRefusedBeforeItSentIsReleased() throws Exception {
    TakenOverEmitterRows.takenOverThenRetried(
        this, Shapes.provider, "/probeX/taken-over/entity-emitter");
  }

  /**
   * The {@code Callable} returns a {@code DeferredResult} already set to the emitter: the emitter
   * is the {@code Callable}'s own result, so it is followed to its end as one the {@code Callable}
   * returned itself ({@code UninterruptedWork.settled}); its own error before any send releases the
   * key and the retry sends once.
   *
   * <p>Was an open finding (medium: a lost send, SPEC 1), fixed by emshapes. Before, the emitter
   * was taken for a later stage's (emitcall follows only a first stage's) and not followed: its
   * work was refused before it sent, yet the key was recorded as answered and the retry got 422
   * response-not-stored; nothing was ever sent within the window. Failed on Boot 3.5 and 4.0 (at
   * bdb67c1, and at 493e7d6 in emshapes' run) in about 22 s: "timed out after 20000 ms waiting for
   * the retry's send: first answer 409 {...request-in-progress...}, last 422 replayed=null
   * {...response-not-stored..., "original-status":200}". A {@code DeferredResult} that is set only
   * after the {@code Callable} returned it is still a later stage's, recorded as answered
   * (docs/spring-boot.md): whatever set it ran and may have sent.
   */
  @Test
  void aTakenOverDeferredResultsEmitterRefusedBeforeItSentIsReleased() throws Exception {
    TakenOverEmitterRows.takenOverThenRetried(
        this, Shapes.provider, "/probeX/taken-over/deferred-emitter");
  }

  /**
   * The same with a {@code CompletableFuture} the {@code Callable} returns already completed with
   * the emitter (emshapes): followed the same way, by the same rule. Failed before the fix as the
   * {@code DeferredResult} row did, on Boot 3.5 and 4.0 at 493e7d6 (about 22 s, "... last 422
   * replayed=null {...response-not-stored..., "original-status":200}").
   */
  @Test
  void aTakenOverCompletedFuturesEmitterRefusedBeforeItSentIsReleased() throws Exception {
    TakenOverEmitterRows.takenOverThenRetried(
        this, Shapes.provider, "/probeX/taken-over/future-emitter");
  }

  /**
   * Detached, not taken over: the {@code Callable} began on time and is still running at the 1 s
   * timeout (answered 409, the key claimed); after it, it returns a {@code DeferredResult} already
   * set to the emitter, whose work is then refused before any send. Spring MVC never dispatches it
   * (its request ended): nothing was sent, so the retry must send once.
   *
   * <p>Found and fixed by emshapes (medium: a lost send, replayed as a success). Before, the late
   * result, a {@code DeferredResult}, was not taken for the emitter it holds ({@code
   * AsyncWork.lateResult} followed only an emitter or an entity of one): it was rendered at once
   * into an empty 200 and stored, the retry got that 200 replayed, and nothing was ever sent.
   * Failed on Boot 3.5 at 7214ce9 in about 22 s: "timed out after 20000 ms waiting for the retry's
   * send: first answer 409 replayed=null {...request-in-progress...}, last 200 replayed=true" (not
   * run on Boot 4.0 before the fix). Now such a result is followed as the one it holds ({@code
   * SettledResults.ownValue}).
   */
  @Test
  void aDetachedCallablesDeferredResultsEmitterRefusedBeforeItSentIsReleased() throws Exception {
    TakenOverEmitterRows.heldThenRetried(
        this, Shapes.provider, "/probeX/detached/deferred-emitter");
  }

  /**
   * Detached, not taken over: the {@code Callable} is still running at the 1 s timeout and returns,
   * after it, a {@code DeferredResult} that a thread of the application sets later: with the
   * provider's refusal before any send ({@code setErrorResult}). Nothing was sent, so the retry
   * must send once, as for a taken-over {@code Callable}'s later {@code DeferredResult}
   * (MvcTakenOverLaterStageProbeTest).
   *
   * <p>Was an open finding (medium: a lost send, replayed as a success), found by emshapes, fixed
   * by fixlater: the late result of a detached {@code Callable} that is a {@code DeferredResult}
   * not set yet was neither awaited nor followed ({@code AsyncWork.lateResult} rendered it at once,
   * through Spring MVC's return value handlers, into an empty 200, stored before the application's
   * thread set it), so the refusal that came after was never heard, the retry got that 200
   * replayed, and nothing was ever sent within the window. Failed on Boot 3.5 at ade8d5d in about
   * 23 s, and again at ad1148a: "timed out after 20000 ms waiting for the retry's send: first
   * answer 409 replayed=null {...request-in-progress...}, last 200 replayed=true". Now the starter
   * awaits it as it awaits a taken-over {@code Callable}'s ({@code AsyncWork.continuedDetached},
   * {@code LaterStages.continueToItsEnd}): its failure goes through the exception resolvers
   * (nothing maps it: the key is released) and the retry sends once.
   */
  @Test
  void aDetachedCallablesLaterDeferredResultThatFailsBeforeItSentIsReleased() throws Exception {
    TakenOverEmitterRows.heldThenRetried(this, Shapes.provider, "/probeX/detached/later-deferred");
  }

  /**
   * (fixlater) The same with a {@code CompletableFuture} that the application's thread completes
   * with the provider's refusal ({@code completeExceptionally}): awaited, its failure released, the
   * retry sends once. Failed before the fix as the {@code DeferredResult} row did.
   */
  @Test
  void aDetachedCallablesLaterFutureThatFailsBeforeItSentIsReleased() throws Exception {
    TakenOverEmitterRows.heldThenRetried(this, Shapes.provider, "/probeX/detached/later-future");
  }

  /**
   * (fixlater) A detached {@code Callable}'s later {@code DeferredResult} that the application's
   * thread sets after a send: sent once, and the retry gets the send's own answer replayed ({@code
   * 200 sent-1}), not an empty 200 stored before the send came. Failed before the fix: the empty
   * 200 was stored at once and replayed.
   */
  @Test
  void aDetachedCallablesLaterDeferredResultThatSendsIsReplayed() throws Exception {
    Answered answered =
        TakenOverEmitterRows.heldThenAnswered(
            this, Shapes.provider, "/probeX/detached/later-deferred-sends");
    String seen = answered.seen();
    assertThat(Shapes.provider.sendsOf(answered.key())).as("sends: " + seen).isEqualTo(1);
    assertThat(answered.last().statusCode()).as("the retry: " + seen).isEqualTo(200);
    assertThat(
            EndpointClient.header(answered.last(), IdempotentEndpointInterceptor.REPLAYED_HEADER))
        .as("the retry: " + seen)
        .isEqualTo("true");
    assertThat(EndpointClient.text(answered.last())).as("the retry: " + seen).isEqualTo("sent-1");
  }

  /**
   * (fixlater) A detached {@code Callable}'s later {@code DeferredResult} that nothing sets: Spring
   * MVC never gets it (its request ended), so the starter expires it as Spring MVC would, at the
   * request's 1 s async timeout (it has no timeout of its own). With a timeout result ({@code
   * timeout-result}), that is its answer, stored and replayed as on time; with none ({@code
   * unset}), the stage that returned it ran and may have sent, so the call is recorded as answered
   * without its body, as for a taken-over {@code Callable}'s
   * (MvcTakenOverDeferredTimeoutProbeTest): the retry gets 422 response-not-stored. Never an empty
   * 200 stored (which the retry got replayed before the fix), and the key is never left claimed.
   *
   * <p>{@code timeout-result} was seen twice under load on Boot 4.0 answering 422
   * response-not-stored: the result came while the timeout was still handled, after its 409 went
   * out, and Spring MVC dispatched it too (MvcDetachedResultDispatchRaceProbeTest holds that window
   * open; fixed by fixrace).
   */
  @ParameterizedTest
  @ValueSource(strings = {"unset", "timeout-result"})
  void aDetachedCallablesLaterDeferredResultThatNothingSetsExpires(String kind) throws Exception {
    Answered answered =
        TakenOverEmitterRows.heldThenAnswered(
            this, Shapes.provider, "/probeX/detached/later-deferred-" + kind);
    String seen = answered.seen();
    if (kind.equals("unset")) {
      assertThat(answered.last().statusCode()).as("the retry: " + seen).isEqualTo(422);
      assertThat(EndpointClient.text(answered.last()))
          .as("the retry: " + seen)
          .contains("response-not-stored");
    } else {
      assertThat(answered.last().statusCode()).as("the retry: " + seen).isEqualTo(200);
      assertThat(EndpointClient.text(answered.last()))
          .as("the retry: " + seen)
          .isEqualTo("timed-out");
    }
  }

  /**
   * probeC, of fixlater: the handler itself returns a {@code CompletableFuture} (no {@code
   * Callable}) that an application thread completes only after the 1 s timeout, with more async
   * work: a {@code DeferredResult} that a later thread sets with the provider's refusal, before any
   * send ({@code setErrorResult}). Nothing was sent, so the retry must send once (SPEC 1: no lost
   * send). fixlater's author suspected an empty 200 stored here.
   *
   * <p>Was an open finding (probeC, a lost send): on Boot 3.5 and 4.0 at 7340e92a, "timed out after
   * 20000 ms waiting for the retry's send: first answer 409 ..., last 200 replayed=true" (an empty
   * body), nothing ever sent: {@code AsyncWork.continuedDetached} continued more async work only
   * for work that began on Spring MVC's task. Fixed (fixstage): such a late value is continued on
   * the starter's threads too, by the starter's run of it ({@code AsyncWork#followsWith}).
   */
  @Test
  void aDetachedStagesLaterDeferredResultThatFailsBeforeItSentIsReleased() throws Exception {
    TakenOverEmitterRows.heldThenRetried(
        this, Shapes.provider, "/probeX/detached/stage-later-deferred");
  }

  /**
   * probeC, of fixlater: the same shape with the handler's own {@code DeferredResult} (no {@code
   * Callable}), which an application thread sets after the 1 s timeout to a {@code
   * CompletableFuture} that then fails with the provider's refusal, before any send. Nothing was
   * sent, so the retry must send once (SPEC 1: no lost send).
   *
   * <p>Was an open finding (probeC, a lost send), the same cause as the row above: on Boot 3.5 and
   * 4.0 at 7340e92a, the retry got an empty 200 replayed, nothing ever sent. Fixed with it.
   *
   * <p>Suspected, not fixed (probeG, at 774a0d85; a lost send and a key held, rare): run 20 times
   * in a row twice on each line, it failed once on Boot 4.0 (Tomcat 11.0.22; 0 of 40 on Boot 3.5),
   * and not with fixctx's "HTTP/1.1 header parser received no bytes" (not seen in 40 runs on Boot
   * 4.0): "timed out after 20000 ms waiting for the work called the provider". Server side: the
   * application's {@code deferred.setResult(future)} threw "IllegalStateException: Calling
   * [asyncDispatch()] is not valid for a request with Async state [COMPLETING]" (Spring MVC's
   * dispatch of the advisor's copy, {@code IdempotentEndpointAdvisor.observed}, while Tomcat still
   * completed the timeout's 409), which ended the application's thread before it called the
   * provider; the starter, told of the late future (the copy's result handler tells it in a {@code
   * finally}), awaits it without a bound (from reading), and at the close the guard reported "1
   * calls still running after its grace period". From reading, Spring MVC alone ignores a {@code
   * setResult} that comes after its timeout handling began, never throws it at the application.
   */
  @Test
  void aDetachedDeferredResultsLaterFutureThatFailsBeforeItSentIsReleased() throws Exception {
    TakenOverEmitterRows.heldThenRetried(
        this, Shapes.provider, "/probeX/detached/deferred-later-future");
  }

  /**
   * probeC, of fixlater: a detached {@code Callable}'s later {@code CompletableFuture}, completed
   * after the timeout with a 502 {@code ResponseEntity} once the provider refused (nothing sent): a
   * 5xx releases the key, so the retry must send once.
   */
  @Test
  void aDetachedCallablesLaterFutureOf502IsReleased() throws Exception {
    TakenOverEmitterRows.heldThenRetried(
        this, Shapes.provider, "/probeX/detached/later-future-502");
  }

  /**
   * probeC, of fixlater: a detached {@code Callable}'s later {@code Callable} that sends, then
   * reads the request's attributes ({@code RequestContextHolder}) and the MDC after the send, when
   * its request has long ended: sent once, and the retry gets {@code 200 sent-1} replayed (not a
   * release, which would send a second time).
   */
  @Test
  void aDetachedCallablesLaterCallableThatReadsTheRequestAfterItSentIsReplayed() throws Exception {
    Answered answered =
        TakenOverEmitterRows.heldThenAnswered(
            this, Shapes.provider, "/probeX/detached/later-callable-reads");
    String seen = answered.seen() + ", read: " + Shapes.reads.get(answered.key());
    Poll.within(Duration.ofSeconds(20))
        .until("the send: " + seen, () -> Shapes.provider.sendsOf(answered.key()) >= 1);
    assertThat(Shapes.provider.sendsOf(answered.key())).as("sends: " + seen).isEqualTo(1);
    assertThat(MvcProbes.replayed(answered.last()))
        .as("the retry: " + seen)
        .isEqualTo("200 replayed=true sent-1");
  }

  /**
   * probeC, of fixlater: a detached {@code Callable}'s later {@code DeferredResult} with its own
   * 500 ms timeout (no timeout result), which an application thread sets after a send at about the
   * moment that timeout fires. Whichever wins, the provider sent once and the key must not be
   * released: the retry gets the send's {@code 200 sent-1} or 422 response-not-stored, and sends
   * stay at one (a second send would break SPEC 1).
   */
  @Test
  void aDetachedCallablesLaterDeferredResultSetAsItsOwnTimeoutFiresSendsOnce() throws Exception {
    Answered answered =
        TakenOverEmitterRows.heldThenAnswered(
            this, Shapes.provider, "/probeX/detached/later-deferred-at-its-timeout");
    String seen = answered.seen();
    Poll.within(Duration.ofSeconds(20))
        .until("the send: " + seen, () -> Shapes.provider.sendsOf(answered.key()) >= 1);
    HttpResponse<byte[]> again =
        MvcProbes.retryUntilAnswered(
            this, "/probeX/detached/later-deferred-at-its-timeout", answered.key());
    seen = seen + ", again " + MvcProbes.replayed(again);
    assertThat(Shapes.provider.sendsOf(answered.key())).as("sends: " + seen).isEqualTo(1);
    assertThat(answered.last().statusCode()).as("the retry: " + seen).isIn(200, 422);
  }

  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(Shapes.class)
  static class ShapesApplication {}

  @RestController
  static class Shapes {
    static final Provider provider = new Provider("probeX");

    @PostMapping("/probeX/taken-over/block")
    public Callable<String> block() {
      return provider.block();
    }

    @PostMapping("/probeX/taken-over/entity-emitter")
    @IdempotentEndpoint
    public Callable<ResponseEntity<SseEmitter>> entityEmitter(
        @RequestHeader("Idempotency-Key") String key) {
      provider.entered.incrementAndGet();
      return () ->
          ResponseEntity.ok().header("X-Probe", "entity").body(provider.emitter(key, true));
    }

    @PostMapping("/probeX/taken-over/deferred-emitter")
    @IdempotentEndpoint
    public Callable<DeferredResult<SseEmitter>> deferredEmitter(
        @RequestHeader("Idempotency-Key") String key) {
      provider.entered.incrementAndGet();
      return () -> {
        DeferredResult<SseEmitter> deferred = new DeferredResult<>();
        deferred.setResult(provider.emitter(key, true));
        return deferred;
      };
    }

    @PostMapping("/probeX/detached/deferred-emitter")
    @IdempotentEndpoint
    public Callable<DeferredResult<SseEmitter>> detachedDeferredEmitter(
        @RequestHeader("Idempotency-Key") String key) {
      provider.entered.incrementAndGet();
      CountDownLatch held = provider.gate();
      return () -> {
        held.await(30, TimeUnit.SECONDS);
        DeferredResult<SseEmitter> deferred = new DeferredResult<>();
        deferred.setResult(provider.emitter(key, true));
        return deferred;
      };
    }

    @PostMapping("/probeX/detached/later-deferred")
    @IdempotentEndpoint
    public Callable<DeferredResult<String>> detachedLaterDeferred(
        @RequestHeader("Idempotency-Key") String key) {
      provider.entered.incrementAndGet();
      CountDownLatch held = provider.gate();
      return () -> {
        held.await(30, TimeUnit.SECONDS);
        DeferredResult<String> deferred = new DeferredResult<>();
        Thread thread =
            new Thread(
                () -> {
                  try {
                    deferred.setResult(provider.call(key, true));
                  } catch (IllegalStateException refused) {
                    deferred.setErrorResult(refused);
                  }
                },
                "probeX-later");
        thread.setDaemon(true);
        thread.start();
        return deferred;
      };
    }

    @PostMapping("/probeX/detached/later-future")
    @IdempotentEndpoint
    public Callable<CompletableFuture<String>> detachedLaterFuture(
        @RequestHeader("Idempotency-Key") String key) {
      provider.entered.incrementAndGet();
      CountDownLatch held = provider.gate();
      return () -> {
        held.await(30, TimeUnit.SECONDS);
        CompletableFuture<String> future = new CompletableFuture<>();
        later(
            () -> {
              try {
                future.complete(provider.call(key, true));
              } catch (IllegalStateException refused) {
                future.completeExceptionally(refused);
              }
            });
        return future;
      };
    }

    @PostMapping("/probeX/detached/later-deferred-sends")
    @IdempotentEndpoint
    public Callable<DeferredResult<String>> detachedLaterDeferredSends(
        @RequestHeader("Idempotency-Key") String key) {
      provider.entered.incrementAndGet();
      CountDownLatch held = provider.gate();
      return () -> {
        held.await(30, TimeUnit.SECONDS);
        DeferredResult<String> deferred = new DeferredResult<>();
        later(() -> deferred.setResult(provider.call(key, false)));
        return deferred;
      };
    }

    @PostMapping("/probeX/detached/later-deferred-unset")
    @IdempotentEndpoint
    public Callable<DeferredResult<String>> detachedLaterDeferredUnset() {
      provider.entered.incrementAndGet();
      CountDownLatch held = provider.gate();
      return () -> {
        held.await(30, TimeUnit.SECONDS);
        return new DeferredResult<>();
      };
    }

    @PostMapping("/probeX/detached/later-deferred-timeout-result")
    @IdempotentEndpoint
    public Callable<DeferredResult<String>> detachedLaterDeferredTimeoutResult() {
      provider.entered.incrementAndGet();
      CountDownLatch held = provider.gate();
      return () -> {
        held.await(30, TimeUnit.SECONDS);
        return new DeferredResult<>(null, "timed-out");
      };
    }

    /** What a later {@code Callable} read after it sent, per key (probeC). */
    static final Map<String, String> reads = new ConcurrentHashMap<>();

    @PostMapping("/probeX/detached/stage-later-deferred")
    @IdempotentEndpoint
    public CompletableFuture<DeferredResult<String>> detachedStageLaterDeferred(
        @RequestHeader("Idempotency-Key") String key) {
      provider.entered.incrementAndGet();
      CountDownLatch held = provider.gate();
      CompletableFuture<DeferredResult<String>> stage = new CompletableFuture<>();
      Thread thread =
          new Thread(
              () -> {
                try {
                  held.await(30, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                  Thread.currentThread().interrupt();
                }
                DeferredResult<String> deferred = new DeferredResult<>();
                stage.complete(deferred);
                later(
                    () -> {
                      try {
                        deferred.setResult(provider.call(key, true));
                      } catch (IllegalStateException refused) {
                        deferred.setErrorResult(refused);
                      }
                    });
              },
              "probeX-stage");
      thread.setDaemon(true);
      thread.start();
      return stage;
    }

    @PostMapping("/probeX/detached/deferred-later-future")
    @IdempotentEndpoint
    public DeferredResult<CompletableFuture<String>> detachedDeferredLaterFuture(
        @RequestHeader("Idempotency-Key") String key) {
      provider.entered.incrementAndGet();
      CountDownLatch held = provider.gate();
      DeferredResult<CompletableFuture<String>> deferred = new DeferredResult<>();
      Thread thread =
          new Thread(
              () -> {
                try {
                  held.await(30, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                  Thread.currentThread().interrupt();
                }
                CompletableFuture<String> future = new CompletableFuture<>();
                deferred.setResult(future);
                later(
                    () -> {
                      try {
                        future.complete(provider.call(key, true));
                      } catch (IllegalStateException refused) {
                        future.completeExceptionally(refused);
                      }
                    });
              },
              "probeX-deferred");
      thread.setDaemon(true);
      thread.start();
      return deferred;
    }

    @PostMapping("/probeX/detached/later-future-502")
    @IdempotentEndpoint
    public Callable<CompletableFuture<ResponseEntity<String>>> detachedLaterFuture502(
        @RequestHeader("Idempotency-Key") String key) {
      provider.entered.incrementAndGet();
      CountDownLatch held = provider.gate();
      return () -> {
        held.await(30, TimeUnit.SECONDS);
        CompletableFuture<ResponseEntity<String>> future = new CompletableFuture<>();
        later(
            () -> {
              try {
                future.complete(ResponseEntity.ok(provider.call(key, true)));
              } catch (IllegalStateException refused) {
                future.complete(ResponseEntity.status(502).body("refused"));
              }
            });
        return future;
      };
    }

    @PostMapping("/probeX/detached/later-callable-reads")
    @IdempotentEndpoint
    public Callable<Callable<String>> detachedLaterCallableReads(
        @RequestHeader("Idempotency-Key") String key) {
      provider.entered.incrementAndGet();
      CountDownLatch held = provider.gate();
      RequestContextHolder.currentRequestAttributes()
          .setAttribute("probeC", "set", RequestAttributes.SCOPE_REQUEST);
      return () -> {
        held.await(30, TimeUnit.SECONDS);
        return () -> {
          String sent = provider.call(key, false);
          Object attribute =
              RequestContextHolder.currentRequestAttributes()
                  .getAttribute("probeC", RequestAttributes.SCOPE_REQUEST);
          reads.put(key, "attribute=" + attribute + " mdc=" + MDC.get("probeC"));
          return sent;
        };
      };
    }

    @PostMapping("/probeX/detached/later-deferred-at-its-timeout")
    @IdempotentEndpoint
    public Callable<DeferredResult<String>> detachedLaterDeferredAtItsTimeout(
        @RequestHeader("Idempotency-Key") String key) {
      provider.entered.incrementAndGet();
      CountDownLatch held = provider.gate();
      return () -> {
        held.await(30, TimeUnit.SECONDS);
        DeferredResult<String> deferred = new DeferredResult<>(500L);
        Thread thread =
            new Thread(
                () -> {
                  String sent = provider.call(key, false);
                  long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(500);
                  while (System.nanoTime() < until) {
                    Thread.onSpinWait();
                  }
                  deferred.setResult(sent);
                },
                "probeX-later");
        thread.setDaemon(true);
        thread.start();
        return deferred;
      };
    }

    /**
     * Runs {@code provider} on a thread of the application's own, a moment (200 ms) after the
     * {@code Callable} returned its result, as a provider's latency would: so that before fixlater
     * the result was rendered first (the fix awaits it, whenever it comes).
     */
    private static void later(Runnable provider) {
      Thread thread =
          new Thread(
              () -> {
                try {
                  Thread.sleep(200);
                } catch (InterruptedException e) {
                  Thread.currentThread().interrupt();
                }
                provider.run();
              },
              "probeX-later");
      thread.setDaemon(true);
      thread.start();
    }

    @PostMapping("/probeX/taken-over/future-emitter")
    @IdempotentEndpoint
    public Callable<CompletableFuture<SseEmitter>> futureEmitter(
        @RequestHeader("Idempotency-Key") String key) {
      provider.entered.incrementAndGet();
      return () -> CompletableFuture.completedFuture(provider.emitter(key, true));
    }
  }
}
