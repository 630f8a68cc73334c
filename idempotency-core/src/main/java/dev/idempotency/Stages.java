package dev.idempotency;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.function.BiFunction;
import java.util.function.Function;

/**
 * How the async paths continue after a stage: on the guard's async executor, never on the thread
 * that completed the stage (a store's I/O thread, a provider client's), unless the stage was
 * already complete when the continuation was attached, in which case the attaching thread (the
 * caller's, or one of the executor's) goes on.
 */
final class Stages {
  private Stages() {}

  /**
   * Continues with {@code next} once {@code stage} completes; an exception thrown by {@code next}
   * fails the result.
   */
  static <T, U> CompletableFuture<U> continueOn(
      CompletionStage<T> stage,
      BiFunction<? super T, Throwable, ? extends CompletionStage<U>> next,
      Executor executor) {
    CompletableFuture<T> future = stage.toCompletableFuture();
    BiFunction<T, Throwable, CompletionStage<U>> guarded =
        (value, error) -> {
          try {
            return next.apply(value, error == null ? null : unwrap(error));
          } catch (Throwable thrown) {
            return CompletableFuture.failedFuture(thrown);
          }
        };
    CompletableFuture<CompletionStage<U>> handled =
        future.isDone() ? future.handle(guarded) : future.handleAsync(guarded, executor);
    return handled.thenCompose(Function.identity());
  }

  /** A stage that completes on {@code executor} after {@code nanos}. */
  static CompletableFuture<Void> delay(long nanos, Executor executor) {
    return CompletableFuture.runAsync(
        () -> {}, CompletableFuture.delayedExecutor(nanos, TimeUnit.NANOSECONDS, executor));
  }

  /** {@link #unwrap}, or {@code null} for no failure. */
  static Throwable unwrapOrNull(Throwable error) {
    return error == null ? null : unwrap(error);
  }

  /** A stage's failure without the {@code CompletionException} wrappers around it. */
  static Throwable unwrap(Throwable error) {
    Throwable t = error;
    while ((t instanceof CompletionException || t instanceof ExecutionException)
        && t.getCause() != null) {
      t = t.getCause();
    }
    return t;
  }
}
