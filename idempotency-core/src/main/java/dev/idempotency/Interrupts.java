package dev.idempotency;

import java.util.function.Supplier;

/**
 * Store work that records a send which already happened runs with the thread's interrupt flag
 * cleared, and the flag is set again afterwards. A sender that returns on an interrupted thread (a
 * {@code Future.cancel(true)}, a {@code shutdownNow()}, a time limiter that fired while the
 * provider call was finishing) has sent: giving up its outcome's write at the first interrupted
 * wait would leave the key in progress, to be taken over and sent again one lease later. An
 * interrupt that arrives meanwhile is kept too.
 *
 * <p>Not thread-safe: one instance per thread and piece of work.
 */
final class Interrupts implements AutoCloseable {

  private boolean interrupted;

  private Interrupts() {}

  /** Clears the current thread's interrupt flag until {@link #close()}, which sets it again. */
  static Interrupts deferred() {
    Interrupts deferred = new Interrupts();
    deferred.clear();
    return deferred;
  }

  /** Runs {@code work} with the interrupt flag cleared, and sets it again afterwards if it was. */
  static <R> R deferredDuring(Supplier<R> work) {
    try (Interrupts ignored = deferred()) {
      return work.get();
    }
  }

  /** Clears the flag again (a store call may have set it), remembering it for {@link #close()}. */
  void clear() {
    interrupted |= Thread.interrupted();
  }

  /** Sleeps the whole time, even if interrupted meanwhile (the interrupt is kept for later). */
  void sleep(long millis) {
    long until = System.nanoTime() + millis * 1_000_000L;
    long left;
    while ((left = until - System.nanoTime()) > 0) {
      try {
        Thread.sleep(Math.max(1, left / 1_000_000L));
      } catch (InterruptedException e) {
        interrupted = true;
      }
    }
  }

  @Override
  public void close() {
    clear();
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
  }
}
