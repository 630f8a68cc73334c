package dev.idempotency;

import java.util.concurrent.CompletableFuture;

/**
 * The stage an async call hands its caller, and every stage derived from it ({@link
 * #newIncompleteFuture()}): when the caller cancels or completes one of them itself (a {@code
 * cancel}, an {@code orTimeout}), it has given up waiting, and the call is told ({@code onGiveUp}),
 * so that a claim still queued for a blocking store's executor is never sent to the store (issue
 * 37). The call's own stages complete them the way any dependent stage completes (internally, not
 * through these public methods), which tells nobody: the call's chain hangs off a completed {@link
 * #root}.
 */
final class CallerStage<T> extends CompletableFuture<T> {

  private final Runnable onGiveUp;

  private CallerStage(Runnable onGiveUp) {
    this.onGiveUp = onGiveUp;
  }

  /** A completed stage to derive the caller's stages from. */
  static CompletableFuture<Void> root(Runnable onGiveUp) {
    CallerStage<Void> root = new CallerStage<>(onGiveUp);
    root.completeQuietly();
    return root;
  }

  private void completeQuietly() {
    super.complete(null);
  }

  /** The caller completes a stage the call has not completed yet: it stops waiting for it. */
  private void giveUpIfPending() {
    if (!isDone()) {
      onGiveUp.run();
    }
  }

  @Override
  public <U> CompletableFuture<U> newIncompleteFuture() {
    return new CallerStage<>(onGiveUp);
  }

  @Override
  public boolean cancel(boolean mayInterruptIfRunning) {
    giveUpIfPending();
    return super.cancel(mayInterruptIfRunning);
  }

  @Override
  public boolean complete(T value) {
    giveUpIfPending();
    return super.complete(value);
  }

  @Override
  public boolean completeExceptionally(Throwable failure) {
    giveUpIfPending();
    return super.completeExceptionally(failure);
  }
}
