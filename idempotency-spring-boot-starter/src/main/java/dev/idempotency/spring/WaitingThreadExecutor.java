package dev.idempotency.spring;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The executor of one {@link PendingCall}'s steps in the guard: they run on the thread that waits
 * for the call (a servlet request thread, which would otherwise park), while it waits, instead of
 * being handed to the guard's async pool and back. When nobody waits it rejects, and the guard runs
 * the step on its own async executor as before. It never runs a task on the thread that submits it
 * (a store's I/O thread). Thread-safe.
 */
final class WaitingThreadExecutor implements Executor {

  private static final Logger log = LoggerFactory.getLogger(WaitingThreadExecutor.class);

  /** Rejection without a stack trace: the normal answer when nobody waits, not an error. */
  private static final RejectedExecutionException NOBODY_WAITS =
      new RejectedExecutionException("nobody waits for this call", null) {
        private static final long serialVersionUID = 1L;

        @Override
        public synchronized Throwable fillInStackTrace() {
          return this;
        }
      };

  private final ArrayDeque<Runnable> tasks = new ArrayDeque<>(); // guarded by this
  private int waiters; // guarded by this

  @Override
  public void execute(Runnable task) {
    synchronized (this) {
      if (waiters > 0) {
        tasks.add(task);
        notifyAll();
        return;
      }
    }
    throw NOBODY_WAITS;
  }

  /**
   * Runs {@code start}, then the call's steps on this thread until {@code done} completes or {@code
   * maxWait} passed; steps submitted from {@code start} on are queued for this thread. Returns
   * early, with the interrupt flag set, if the thread is interrupted.
   *
   * @param done what the caller waits for
   * @param maxWait the longest wait
   * @param start what to do once steps are queued for this thread (report the work's result)
   */
  void runWhileWaiting(CompletableFuture<?> done, Duration maxWait, Runnable start) {
    long deadline = System.nanoTime() + maxWait.toNanos();
    synchronized (this) {
      waiters++;
    }
    try {
      start.run();
      done.whenComplete((value, failure) -> wake());
      while (true) {
        Runnable task;
        synchronized (this) {
          while ((task = tasks.poll()) == null) {
            long left = deadline - System.nanoTime();
            if (done.isDone() || left <= 0) {
              return;
            }
            wait(left / 1_000_000, (int) (left % 1_000_000));
          }
        }
        run(task);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } finally {
      leave();
    }
  }

  private synchronized void wake() {
    notifyAll();
  }

  /** Stops taking steps; those already queued for this thread run here, now. */
  private void leave() {
    ArrayDeque<Runnable> left;
    synchronized (this) {
      waiters--;
      if (waiters > 0 || tasks.isEmpty()) {
        return;
      }
      left = new ArrayDeque<>(tasks);
      tasks.clear();
    }
    left.forEach(WaitingThreadExecutor::run);
  }

  private static void run(Runnable task) {
    try {
      task.run();
    } catch (RuntimeException e) {
      log.warn("A step of an idempotent call failed on the waiting thread", e);
    }
  }
}
