package dev.idempotency;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.BiConsumer;
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

  /**
   * Like {@link #continueOn}, for a step whose stage's value must not be dropped: if {@code
   * executor} refuses the step ({@link RejectedExecutionException}: a pool the guard's close()
   * stopped), {@code rejected} runs instead, on the thread that completed {@code stage} and holds
   * its value, and the result fails with what it returns.
   */
  static <T, U> CompletableFuture<U> continueOrReject(
      CompletionStage<T> stage,
      BiFunction<? super T, Throwable, ? extends CompletionStage<U>> next,
      Executor executor,
      Rejected<? super T> rejected) {
    CompletableFuture<T> future = stage.toCompletableFuture();
    if (future.isDone()) {
      return continueOn(future, next, executor); // goes on on this thread: no hand-off to refuse
    }
    CompletableFuture<U> result = new CompletableFuture<>();
    future.whenComplete(
        (value, error) -> {
          try {
            executor.execute(
                () -> continueOn(future, next, Runnable::run).whenComplete(relayTo(result)));
          } catch (Throwable thrown) {
            // an executor that fails otherwise (an Error while its pool adds a worker) has not
            // taken the step either: without this, the error would vanish into this completion
            // and the result would never complete, its claim held with nothing sent
            RejectedExecutionException refused =
                thrown instanceof RejectedExecutionException r
                    ? r
                    : new RejectedExecutionException(
                        "the executor failed to take the step", thrown);
            Throwable failure;
            try {
              failure = rejected.apply(value, unwrapOrNull(error), refused);
            } catch (Throwable failed) {
              failure = failed;
            }
            result.completeExceptionally(
                failure == refused && refused != thrown ? thrown : failure);
          }
        });
    return result;
  }

  /** What {@link #continueOrReject} does with a stage's outcome when its step was refused. */
  @FunctionalInterface
  interface Rejected<T> {
    /**
     * @param value the stage's value, or {@code null} if it failed
     * @param error the stage's failure, or {@code null}
     * @param refused the executor's refusal of the step
     * @return what the result fails with
     */
    Throwable apply(T value, Throwable error, RejectedExecutionException refused);
  }

  private static <U> BiConsumer<U, Throwable> relayTo(CompletableFuture<U> result) {
    return (value, error) -> {
      if (error != null) {
        result.completeExceptionally(error);
      } else {
        result.complete(value);
      }
    };
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
