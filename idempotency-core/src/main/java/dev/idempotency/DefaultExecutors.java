package dev.idempotency;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.LinkedTransferQueue;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The threads one guard uses when the application gives it none: bounded pools of daemon threads
 * named after the guard ({@code idempotency-g<guard>-store-io-N}, {@code -async-N}, {@code
 * -lease-keeper-N}, {@code -store-probe-N}), created as work arrives. A thread of the store-io and
 * async pools, once started, stays until the guard is closed (so that a hand-off from an event loop
 * never starts one again, see {@link #boundedPool}); the other pools' idle threads end after a
 * while. They belong to the guard, which shuts them down at {@link IdempotencyGuard#close()};
 * executors the application gave it are never shut down by it.
 */
final class DefaultExecutors {

  /** Threads of the default blocking-store pool; size yours like the store's connection pool. */
  static final int STORE_IO_THREADS = 16;

  /** Threads of the default async pool: twice the processors, at least four. */
  static final int ASYNC_THREADS = Math.max(4, 2 * Runtime.getRuntime().availableProcessors());

  private static final AtomicInteger GUARDS = new AtomicInteger();

  /** The prefix of this guard's thread names: {@code idempotency-g<number>-}. */
  final String threadPrefix = "idempotency-g" + GUARDS.incrementAndGet() + "-";

  private final List<ExecutorService> owned = new ArrayList<>();

  /** A pool for the calls of blocking stores (JDBC) for {@code executeAsync}, and batch writes. */
  ExecutorService storeIo() {
    return own(boundedPool(threadPrefix + "store-io", STORE_IO_THREADS));
  }

  /** A pool for async senders, codecs and listeners after a store answered. */
  ExecutorService async() {
    return own(boundedPool(threadPrefix + "async", ASYNC_THREADS));
  }

  private java.util.concurrent.ScheduledThreadPoolExecutor prober;

  /** Set by {@link #shutdown}: no executor is created after it. */
  private boolean shutDown;

  /**
   * The one thread that probes a failing store ({@link StoreOutages}), created on first use; it
   * ends when idle and is stopped, not awaited, at {@link #shutdown}.
   *
   * @throws java.util.concurrent.RejectedExecutionException once the guard's executors are shut
   *     down
   */
  synchronized java.util.concurrent.ScheduledExecutorService prober() {
    if (prober == null) {
      if (shutDown) {
        throw new java.util.concurrent.RejectedExecutionException(
            "the guard is closed: no more store probes");
      }
      prober =
          own(
              new java.util.concurrent.ScheduledThreadPoolExecutor(
                  1, daemonThreads(threadPrefix + "store-probe")));
      prober.setExecuteExistingDelayedTasksAfterShutdownPolicy(false);
      prober.setKeepAliveTime(30, TimeUnit.SECONDS);
      prober.allowCoreThreadTimeOut(true);
    }
    return prober;
  }

  /** Remembers an executor to shut down at {@link #shutdown}. */
  synchronized <E extends ExecutorService> E own(E executor) {
    owned.add(executor);
    return executor;
  }

  /**
   * Shuts down every executor this guard created: queued work still runs, for at most {@code
   * millis} in all; then what is left is interrupted. The store probe is not waited for: its answer
   * is no one's once the guard closes, and during an outage it can wait the store's whole bound;
   * its thread is interrupted at once (the guard's own thread, never an application's).
   *
   * <p>The lock is held only to take the list, not while waiting: a probe that ends meanwhile asks
   * {@link #prober()} to schedule the next, and must get its refusal rather than wait for the lock
   * (issue 37: that wait held every close during an outage for the whole {@code millis}).
   *
   * <p>Called on a thread of one of these pools (an application's callback on a stage the guard's
   * async pool completed), it shuts that pool down without waiting for it, which could only wait
   * for itself, and never interrupts it: that thread runs the application's code (issue 37, SPEC
   * 16). The pool's queued work still runs once the thread is free, and its threads then end.
   */
  void shutdown(long millis) {
    List<ExecutorService> awaited;
    ExecutorService probe;
    synchronized (this) {
      shutDown = true;
      probe = prober;
      awaited = new ArrayList<>(owned);
    }
    if (probe != null) {
      probe.shutdownNow();
      awaited.remove(probe);
    }
    awaited.forEach(ExecutorService::shutdown);
    if (awaited.removeIf(DefaultExecutors::runsThisThread)) {
      CallEvents.log.debug(
          "Closing the idempotency guard on a thread of its own pool ({}): that pool is shut down"
              + " but not waited for, and this thread is not interrupted",
          Thread.currentThread().getName());
    }
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
    for (ExecutorService executor : awaited) {
      try {
        long left = deadline - System.nanoTime();
        if (left <= 0 || !executor.awaitTermination(left, TimeUnit.NANOSECONDS)) {
          executor.shutdownNow();
        }
      } catch (InterruptedException e) {
        executor.shutdownNow();
        Thread.currentThread().interrupt();
      }
    }
  }

  /**
   * A pool of up to {@code threads} threads over a lock-free queue: a task is handed to it from a
   * store's I/O thread or a Netty event loop, which must never wait for a lock there.
   *
   * <ol>
   *   <li>The queue is a {@code LinkedTransferQueue}: a {@code LinkedBlockingQueue} takes its locks
   *       on every hand-off, contended by the idle workers' polls.
   *   <li>Its threads never idle out: a hand-off to a pool with fewer threads than its size starts
   *       one in {@code ThreadPoolExecutor.addWorker}, under the executor's own lock, which a
   *       worker ending after its keep-alive also takes (issue 39). Once the pool has all its
   *       threads, a hand-off only offers to the queue. Until then (the first {@code threads}
   *       hand-offs of a guard) it still starts a thread under that lock.
   * </ol>
   */
  private static ThreadPoolExecutor boundedPool(String name, int threads) {
    return new ThreadPoolExecutor(
        threads, threads, 0, TimeUnit.SECONDS, new LinkedTransferQueue<>(), daemonThreads(name));
  }

  /** Daemon threads named {@code name-1}, {@code name-2}, ... */
  static ThreadFactory daemonThreads(String name) {
    return new DaemonThreads(name);
  }

  /** Whether the calling thread is one of {@code executor}'s, made by {@link #daemonThreads}. */
  private static boolean runsThisThread(ExecutorService executor) {
    return executor instanceof ThreadPoolExecutor pool
        && Thread.currentThread() instanceof PoolThread thread
        && thread.factory == pool.getThreadFactory();
  }

  /** The factory of one pool's threads, which know it ({@link #runsThisThread}). */
  private static final class DaemonThreads implements ThreadFactory {
    private final String name;
    private final AtomicInteger count = new AtomicInteger();

    DaemonThreads(String name) {
      this.name = name;
    }

    @Override
    public Thread newThread(Runnable runnable) {
      Thread thread = new PoolThread(runnable, name + "-" + count.incrementAndGet(), this);
      thread.setDaemon(true);
      return thread;
    }
  }

  /** A thread of a pool of the guard's, made by its {@link DaemonThreads}. */
  private static final class PoolThread extends Thread {
    final ThreadFactory factory;

    PoolThread(Runnable runnable, String name, ThreadFactory factory) {
      super(runnable, name);
      this.factory = factory;
    }
  }
}
