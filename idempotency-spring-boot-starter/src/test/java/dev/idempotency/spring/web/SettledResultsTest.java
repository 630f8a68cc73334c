package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;
import org.springframework.http.ResponseEntity;
import org.springframework.web.context.request.async.DeferredResult;
import org.springframework.web.servlet.mvc.method.annotation.SseEmitter;

/**
 * Which results {@link SettledResults} takes for the value they hold: a {@code ResponseEntity}'s
 * body, a {@code DeferredResult} set and a {@code CompletableFuture} completed by then, as deep as
 * they go; never one not set yet, nor a failure.
 */
class SettledResultsTest {

  @Test
  void aSetDeferredResultOrACompletedFutureIsItsValue() {
    SseEmitter emitter = new SseEmitter();
    DeferredResult<Object> deferred = new DeferredResult<>();
    deferred.setResult(ResponseEntity.ok(CompletableFuture.completedFuture(emitter)));

    assertThat(SettledResults.settled(deferred)).isTrue();
    assertThat(SettledResults.ownValue(deferred)).isSameAs(emitter);
    assertThat(SettledResults.ownValue(CompletableFuture.completedFuture(emitter)))
        .isSameAs(emitter);
    assertThat(SettledResults.ownValue(ResponseEntity.ok(emitter))).isSameAs(emitter);
  }

  @Test
  void oneNotSetYetIsALaterStagesAndStaysAsItIs() {
    DeferredResult<Object> deferred = new DeferredResult<>();
    CompletableFuture<Object> future = new CompletableFuture<>();

    assertThat(SettledResults.settled(deferred)).isFalse();
    assertThat(SettledResults.settled(future)).isFalse();
    assertThat(SettledResults.ownValue(deferred)).isSameAs(deferred);
    assertThat(SettledResults.ownValue(future)).isSameAs(future);
  }

  @Test
  void aFailureStaysAsItIs() {
    DeferredResult<Object> deferred = new DeferredResult<>();
    deferred.setErrorResult(new IllegalStateException("refused"));
    CompletableFuture<Object> future =
        CompletableFuture.failedFuture(new IllegalStateException("refused"));

    assertThat(SettledResults.settled(deferred)).isTrue();
    assertThat(SettledResults.ownValue(deferred)).isSameAs(deferred);
    assertThat(SettledResults.ownValue(future)).isSameAs(future);
  }
}
