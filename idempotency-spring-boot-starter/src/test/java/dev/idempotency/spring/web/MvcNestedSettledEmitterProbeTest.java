package dev.idempotency.spring.web;

import dev.idempotency.spring.web.TakenOverEmitterRows.Provider;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.context.request.async.DeferredResult;
import org.springframework.web.servlet.mvc.method.annotation.SseEmitter;

/**
 * probeB, of emshapes (cdc60054), {@link SettledResults}: taken-over work (queued behind Spring
 * MVC's held one-thread executor at the 500 ms timeout) whose {@code Callable} returns its emitter
 * nested in settled results: a {@code DeferredResult} already set to a completed {@code
 * CompletableFuture} of a {@code ResponseEntity} of the emitter ({@code nested}), and a completed
 * {@code CompletableFuture} of a {@code ResponseEntity} of the emitter ({@code future-entity}). The
 * emitter's work is refused before any send ({@code completeWithError}): nothing was sent, so the
 * key must be released and the retry sends once (SPEC 1, no lost send). Steps and provider: {@link
 * TakenOverEmitterRows}. One application on a real Redis. Both rows pass on Boot 3.5 and 4.0
 * (probeB, on ad1148aa): {@code SettledResults.ownValue} follows the nesting to the emitter.
 */
class MvcNestedSettledEmitterProbeTest extends MvcProbeApplication {

  MvcNestedSettledEmitterProbeTest() {
    super(
        NestedApplication.class,
        "spring.mvc.async.request-timeout=500ms",
        "spring.task.execution.pool.core-size=1",
        "spring.task.execution.pool.max-size=1",
        "idempotency.close-grace-period=10s");
  }

  @Override
  public int runs() {
    return Nested.provider.entered.get();
  }

  @Test
  void aTakenOverNestedSettledEmitterRefusedBeforeItSentIsReleased() throws Exception {
    TakenOverEmitterRows.takenOverThenRetried(this, Nested.provider, "/probeB/taken-over/nested");
  }

  @Test
  void aTakenOverFutureOfAnEntityOfAnEmitterRefusedBeforeItSentIsReleased() throws Exception {
    TakenOverEmitterRows.takenOverThenRetried(
        this, Nested.provider, "/probeB/taken-over/future-entity");
  }

  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(Nested.class)
  static class NestedApplication {}

  @RestController
  static class Nested {
    static final Provider provider = new Provider("probeB");

    @PostMapping("/probeB/taken-over/block")
    public Callable<String> block() {
      return provider.block();
    }

    @PostMapping("/probeB/taken-over/nested")
    @IdempotentEndpoint
    public Callable<DeferredResult<CompletableFuture<ResponseEntity<SseEmitter>>>> nested(
        @RequestHeader("Idempotency-Key") String key) {
      provider.entered.incrementAndGet();
      return () -> {
        DeferredResult<CompletableFuture<ResponseEntity<SseEmitter>>> deferred =
            new DeferredResult<>();
        deferred.setResult(
            CompletableFuture.completedFuture(ResponseEntity.ok(provider.emitter(key, true))));
        return deferred;
      };
    }

    @PostMapping("/probeB/taken-over/future-entity")
    @IdempotentEndpoint
    public Callable<CompletableFuture<ResponseEntity<SseEmitter>>> futureEntity(
        @RequestHeader("Idempotency-Key") String key) {
      provider.entered.incrementAndGet();
      return () ->
          CompletableFuture.completedFuture(
              ResponseEntity.ok()
                  .header("X-Probe", "future-entity")
                  .body(provider.emitter(key, true)));
    }
  }
}
