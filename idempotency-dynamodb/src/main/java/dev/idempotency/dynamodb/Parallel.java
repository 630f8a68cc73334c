package dev.idempotency.dynamodb;

import dev.idempotency.KeyStoreException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The store's own threads for a batch's parallel conditional writes (the blocking client has no
 * batch of conditional writes): daemon threads that end when idle, shut down by {@link #close()}.
 */
final class Parallel implements AutoCloseable {

  private final ExecutorService executor;

  Parallel(int threads) {
    AtomicInteger count = new AtomicInteger();
    ThreadPoolExecutor pool =
        new ThreadPoolExecutor(
            threads,
            threads,
            10,
            TimeUnit.SECONDS,
            new LinkedBlockingQueue<>(),
            task -> {
              Thread thread = new Thread(task, "idempotency-dynamodb-" + count.incrementAndGet());
              thread.setDaemon(true);
              return thread;
            });
    pool.allowCoreThreadTimeOut(true);
    this.executor = pool;
  }

  /**
   * Runs the tasks in parallel and returns their results in order. Each task bounds its own time
   * (every request has the store's operation timeout).
   */
  <T> List<T> runAll(List<Callable<T>> tasks) {
    if (tasks.size() == 1) {
      try {
        return List.of(tasks.get(0).call());
      } catch (RuntimeException e) {
        throw e;
      } catch (Exception e) {
        throw new KeyStoreException("DynamoDB store: a batch write failed", e);
      }
    }
    List<Future<T>> futures = new ArrayList<>(tasks.size());
    for (Callable<T> task : tasks) {
      futures.add(executor.submit(task));
    }
    List<T> results = new ArrayList<>(tasks.size());
    RuntimeException failure = null;
    for (Future<T> future : futures) {
      try {
        results.add(future.get());
      } catch (ExecutionException e) {
        if (failure == null) {
          failure =
              e.getCause() instanceof RuntimeException runtime
                  ? runtime
                  : new KeyStoreException("DynamoDB store: a batch write failed", e.getCause());
        }
        results.add(null);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        futures.forEach(pending -> pending.cancel(true));
        throw new KeyStoreException("DynamoDB store: interrupted during a batch", e);
      }
    }
    if (failure != null) {
      throw failure;
    }
    return results;
  }

  @Override
  public void close() {
    executor.shutdown();
  }
}
