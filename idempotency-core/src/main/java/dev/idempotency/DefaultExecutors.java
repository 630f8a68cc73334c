package dev.idempotency;

import java.util.concurrent.Executor;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The threads a guard uses when the application gives it none: bounded pools of daemon threads,
 * created on first use and shared by every guard of the JVM. Idle threads end after a minute.
 */
final class DefaultExecutors {

  /** Threads of the default blocking-store pool; size yours like the store's connection pool. */
  static final int STORE_IO_THREADS = 16;

  /** Threads of the default async pool: twice the processors, at least four. */
  static final int ASYNC_THREADS = Math.max(4, 2 * Runtime.getRuntime().availableProcessors());

  private DefaultExecutors() {}

  /** Runs the calls of blocking stores (JDBC) for {@code executeAsync}, and batch writes. */
  static Executor storeIo() {
    return StoreIo.POOL;
  }

  /** Runs async senders, codecs and listeners after a store answered. */
  static Executor async() {
    return Async.POOL;
  }

  private static final class StoreIo {
    static final Executor POOL = boundedPool("idempotency-store-io", STORE_IO_THREADS);
  }

  private static final class Async {
    static final Executor POOL = boundedPool("idempotency-async", ASYNC_THREADS);
  }

  private static ThreadPoolExecutor boundedPool(String name, int threads) {
    ThreadPoolExecutor pool =
        new ThreadPoolExecutor(
            threads,
            threads,
            1,
            TimeUnit.MINUTES,
            new LinkedBlockingQueue<>(),
            daemonThreads(name));
    pool.allowCoreThreadTimeOut(true);
    return pool;
  }

  /** Daemon threads named {@code name-1}, {@code name-2}, ... */
  static ThreadFactory daemonThreads(String name) {
    AtomicInteger count = new AtomicInteger();
    return runnable -> {
      Thread thread = new Thread(runnable, name + "-" + count.incrementAndGet());
      thread.setDaemon(true);
      return thread;
    };
  }
}
