package dev.idempotency;

import java.util.concurrent.CompletableFuture;

/**
 * The stage an async call hands its caller, and every stage the caller derives from it ({@link
 * #newIncompleteFuture()}): when the caller cancels or completes one of them itself (a {@code
 * cancel}, an {@code orTimeout}), it has given up waiting, and the call is told ({@code onGiveUp}),
 * so that a claim still queued for a blocking store's executor is never sent to the store (issue
 * 37). The call's own result completes it through {@link #settle}, which tells nobody.
 */
final class CallerStage<T> extends CompletableFuture<T> {

  private final Runnable onGiveUp;

  CallerStage(Runnable onGiveUp) {
    this.onGiveUp = onGiveUp;
  }

  @Override
  public <U> CompletableFuture<U> newIncompleteFuture() {
    return new CallerStage<>(onGiveUp);
  }

  @Override
  public boolean cancel(boolean mayInterruptIfRunning) {
    onGiveUp.run();
    return super.cancel(mayInterruptIfRunning);
  }

  @Override
  public boolean complete(T value) {
    onGiveUp.run();
    return super.complete(value);
  }

  @Override
  public boolean completeExceptionally(Throwable failure) {
    onGiveUp.run();
    return super.completeExceptionally(failure);
  }

  /** Completes this stage with the call's own result or failure. */
  void settle(T value, Throwable failure) {
    if (failure != null) {
      super.completeExceptionally(failure);
    } else {
      super.complete(value);
    }
  }
}
