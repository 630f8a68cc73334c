package dev.idempotency.testservers;

import java.time.Duration;
import java.util.concurrent.Executor;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Two executors whose tasks run only when the test runs them, one by one: the steps of a call
 * ({@link #callSteps()}) and its store calls ({@link #storeCalls()}). A test drives an async call
 * step by step with {@link #nextCallStep()} and {@link #nextStoreCall()}, and lets it finish with
 * {@link #runUntilDone(Future, Duration)}.
 *
 * <p>The executors may be handed tasks from any thread; the tasks run on the test's thread.
 */
public final class StepQueues {

  /** How long a step the test expects may take to be handed over. */
  private static final Duration STEP_WAIT = Duration.ofSeconds(30);

  private final LinkedBlockingQueue<Runnable> callSteps = new LinkedBlockingQueue<>();
  private final LinkedBlockingQueue<Runnable> storeCalls = new LinkedBlockingQueue<>();

  /** The executor of the call's steps after the store answered (the one its send waits for). */
  public Executor callSteps() {
    return callSteps::add;
  }

  /** The executor of the blocking store's calls (claims, renewals, releases, outcomes). */
  public Executor storeCalls() {
    return storeCalls::add;
  }

  /** The next step handed to the call's executor, not yet run; fails after 30 s without one. */
  public Runnable nextCallStep() throws InterruptedException {
    return next(callSteps, "a step handed to the call's executor");
  }

  /** The next store call handed to the store executor, not yet run; fails after 30 s. */
  public Runnable nextStoreCall() throws InterruptedException {
    return next(storeCalls, "a call handed to the store executor");
  }

  /**
   * Runs what either executor is handed, store calls first, until {@code call} is done.
   *
   * @throws TimeoutException when it is not done within {@code timeout}
   */
  public void runUntilDone(Future<?> call, Duration timeout)
      throws InterruptedException, TimeoutException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (!call.isDone()) {
      if (System.nanoTime() - deadline > 0) {
        throw new TimeoutException("the call did not end in " + timeout.toMillis() + " ms");
      }
      Runnable task = storeCalls.poll();
      if (task == null) {
        task = callSteps.poll(10, TimeUnit.MILLISECONDS);
      }
      if (task != null) {
        task.run();
      }
    }
  }

  private static Runnable next(LinkedBlockingQueue<Runnable> queue, String what)
      throws InterruptedException {
    Runnable task = queue.poll(STEP_WAIT.toMillis(), TimeUnit.MILLISECONDS);
    if (task == null) {
      throw new AssertionError("no " + what + " in " + STEP_WAIT.toSeconds() + " s");
    }
    return task;
  }
}
