package dev.idempotency;

import java.util.concurrent.atomic.AtomicLong;

/**
 * Counts the calls of one guard that are running (a blocking or async call from its start to its
 * end, a batch's key from its hand-out to its report), so that {@link IdempotencyGuard#close()} can
 * let them finish, their leases renewed and their outcomes recorded, before it stops the guard's
 * threads.
 *
 * <p>Once {@link #close()} was called, {@link #enter()} refuses: no call starts on a closing guard.
 * One atomic word holds both the count and the closed flag, so that a call either started before
 * the close (and is waited for) or is refused. Thread-safe; lock-free on the calls' side.
 */
final class CallsInFlight {

  private static final long CLOSED = Long.MIN_VALUE;

  /** {@link #CLOSED} once closed, plus the number of running calls. */
  private final AtomicLong state = new AtomicLong();

  private final Object ended = new Object();

  /**
   * A call starts.
   *
   * @return {@code false} if the guard is closing or closed: the call must not start
   */
  boolean enter() {
    while (true) {
      long current = state.get();
      if ((current & CLOSED) != 0) {
        return false;
      }
      if (state.compareAndSet(current, current + 1)) {
        return true;
      }
    }
  }

  /**
   * A running call hands on work that must count as running after the call itself ends (an outcome
   * written in the background): counted even once closing, since the call it continues was.
   */
  void continueRunning() {
    state.incrementAndGet();
  }

  /** A call that {@link #enter() entered} (or {@link #continueRunning() continued}) ended. */
  void exit() {
    if (state.decrementAndGet() == CLOSED) {
      synchronized (ended) {
        ended.notifyAll();
      }
    }
  }

  /** Refuses every later {@link #enter()}; whether it was not closed yet. */
  boolean close() {
    while (true) {
      long current = state.get();
      if ((current & CLOSED) != 0) {
        return false;
      }
      if (state.compareAndSet(current, current | CLOSED)) {
        return true;
      }
    }
  }

  boolean closed() {
    return (state.get() & CLOSED) != 0;
  }

  /** How many calls are running. */
  int running() {
    return (int) (state.get() & ~CLOSED);
  }

  /**
   * After {@link #close()}: waits until no call is running, for at most {@code nanos}, never giving
   * up on an interrupt (the flag is set again afterwards): closing must not abandon calls early
   * because the closing thread was interrupted.
   *
   * @return how many calls are still running (0 if all ended in time)
   */
  int awaitNone(long nanos) {
    long deadline = System.nanoTime() + nanos;
    boolean interrupted = false;
    synchronized (ended) {
      long left;
      while (running() > 0 && (left = deadline - System.nanoTime()) > 0) {
        try {
          ended.wait(Math.max(1, left / 1_000_000L));
        } catch (InterruptedException e) {
          interrupted = true;
        }
      }
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
    return running();
  }
}
