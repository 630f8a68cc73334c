package dev.idempotency;

import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.RejectedExecutionException;

/**
 * The stages of one guard's async calls that have not completed, so that {@link
 * IdempotencyGuard#close()} completes those it gives up on. A continuation queued on the guard's
 * own pool when close() stops it is dropped (neither run nor rejected), and a pause scheduled
 * towards a stopped pool never ends: without this their callers' stages would never complete.
 *
 * <p>A stage is completed with a {@link RejectedExecutionException}, which the call turns into the
 * {@link IllegalStateException} that names close; nothing is written or released for its key, which
 * is left as a crash leaves it. Thread-safe; lock-free on the calls' side.
 */
final class PendingStages {

  private final Set<CompletableFuture<?>> pending = ConcurrentHashMap.newKeySet();
  private volatile boolean abandoned;

  /**
   * Tracks a call's stage until it completes; one tracked after {@link #abandonAll} ends at once.
   */
  void track(CompletableFuture<?> stage) {
    pending.add(stage);
    stage.whenComplete((value, failure) -> pending.remove(stage));
    if (abandoned) {
      abandon(stage);
    }
  }

  /**
   * Completes every stage still pending, once close() has given up on them.
   *
   * @return how many were completed here
   */
  int abandonAll() {
    abandoned = true;
    int count = 0;
    for (CompletableFuture<?> stage : pending) {
      if (abandon(stage)) {
        count++;
      }
    }
    return count;
  }

  private static boolean abandon(CompletableFuture<?> stage) {
    return stage.completeExceptionally(
        new RejectedExecutionException(
            "the IdempotencyGuard was closed and gave up on this call after its grace period"));
  }
}
