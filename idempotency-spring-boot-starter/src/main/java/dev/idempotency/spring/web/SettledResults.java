package dev.idempotency.spring.web;

import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import org.jspecify.annotations.Nullable;
import org.springframework.http.ResponseEntity;
import org.springframework.web.context.request.async.DeferredResult;

/**
 * A stage's result that holds its value already: a {@code DeferredResult} set, or a {@code
 * CompletionStage} completed, by the time the stage that returned it ended (a {@code Callable} that
 * sets the {@code DeferredResult} it returns, or returns a completed future). Its value is that
 * stage's own result, as if the stage had returned it itself, with no later stage in between that
 * could have sent; one set later is a later stage's, whatever set it ran and may have sent. So an
 * emitter in it is followed to its end as one the stage returned itself ({@link
 * AsyncWork#takenOverResult}, {@link AsyncWork#lateResult}).
 */
final class SettledResults {

  private SettledResults() {}

  /**
   * Whether {@code result} is a {@code DeferredResult} or a {@code CompletionStage} that holds its
   * result (a value or a failure) already; asked as the stage that returned it ends.
   */
  static boolean settled(@Nullable Object result) {
    if (result instanceof DeferredResult<?> deferred) {
      return deferred.hasResult();
    }
    return result instanceof CompletionStage<?> stage && stage.toCompletableFuture().isDone();
  }

  /**
   * What {@code result} is as the stage that returned it left it: the body of a {@code
   * ResponseEntity}, and the value of a settled {@code DeferredResult} or {@code CompletionStage}
   * ({@link #settled}), followed through as deep as they go; {@code result} itself otherwise (a
   * failure, or one not settled yet, stays as it is).
   */
  static @Nullable Object ownValue(@Nullable Object result) {
    Object value = result;
    for (int depth = 0; depth < 16; depth++) {
      Object next = value;
      if (value instanceof ResponseEntity<?> entity) {
        next = entity.getBody();
      } else if (value instanceof DeferredResult<?> deferred && deferred.hasResult()) {
        Object set = deferred.getResult();
        next = set instanceof Throwable ? value : set;
      } else if (value instanceof CompletionStage<?> stage) {
        CompletableFuture<?> future = stage.toCompletableFuture();
        if (future.isDone() && !future.isCompletedExceptionally()) {
          try {
            next = future.getNow(null);
          } catch (CompletionException | CancellationException e) {
            next = value;
          }
        }
      }
      if (next == value) {
        return value;
      }
      value = next;
    }
    return value;
  }
}
