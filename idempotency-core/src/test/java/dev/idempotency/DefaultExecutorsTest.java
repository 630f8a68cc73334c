package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.testservers.Poll;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Function;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The guard's own executors. A store's I/O thread (Lettuce's event loop) hands the call's next step
 * to the async pool: that hand-off must never wait for a lock. A pool over a {@code
 * LinkedBlockingQueue} takes the queue's locks on every hand-off, and a Lettuce event loop was seen
 * (BlockHound, WebFluxRedisEndpointTest on Boot 4.0) parked on it while a worker held it.
 */
class DefaultExecutorsTest {

  @Test
  void aHandOffToTheAsyncPoolNeverWaitsForTheQueuesLock() throws Exception {
    DefaultExecutors executors = new DefaultExecutors();
    ThreadPoolExecutor pool = (ThreadPoolExecutor) executors.async();
    CountDownLatch busy = new CountDownLatch(DefaultExecutors.ASYNC_THREADS);
    CountDownLatch release = new CountDownLatch(1);
    CountDownLatch lockHeld = new CountDownLatch(1);
    CountDownLatch letGo = new CountDownLatch(1);
    try {
      for (int i = 0; i < DefaultExecutors.ASYNC_THREADS; i++) {
        pool.execute(
            () -> {
              busy.countDown();
              await(release);
            });
      }
      assertThat(busy.await(30, TimeUnit.SECONDS)).as("every worker is busy").isTrue();
      pool.execute(() -> {}); // stays queued while every worker is busy
      // whoever looks through the queue (a remove, as a cancelled task's) holds what the queue
      // holds meanwhile; an object whose equals waits makes that moment last
      Object slowToCompare =
          new Object() {
            @Override
            public boolean equals(Object other) {
              lockHeld.countDown();
              await(letGo);
              return false;
            }

            @Override
            public int hashCode() {
              return 0;
            }
          };
      CompletableFuture<Boolean> looking =
          CompletableFuture.supplyAsync(() -> pool.getQueue().remove(slowToCompare));
      assertThat(lockHeld.await(30, TimeUnit.SECONDS)).isTrue();

      CompletableFuture<Void> handOff = CompletableFuture.runAsync(() -> pool.execute(() -> {}));

      try {
        handOff.get(5, TimeUnit.SECONDS);
      } catch (java.util.concurrent.TimeoutException waited) {
        throw new AssertionError("the hand-off waited for the queue's lock", waited);
      } finally {
        letGo.countDown();
        looking.get(30, TimeUnit.SECONDS);
      }
    } finally {
      letGo.countDown();
      release.countDown();
      executors.shutdown(10_000);
    }
  }

  /**
   * Issue 39: a pool whose threads idle out starts a new one on the next hand-off, in {@code
   * ThreadPoolExecutor.addWorker}, which takes the executor's own lock: an event loop then parks
   * (what BlockHound flags) while another thread holds that lock, as a worker ending after its
   * keep-alive does. Once a pool's threads have been started, a hand-off must not need that lock,
   * however long the pool was idle.
   */
  @ParameterizedTest
  @ValueSource(strings = {"async", "storeIo"})
  void aHandOffAfterTheKeepAliveNeverWaitsForTheExecutorsLock(String poolName) throws Exception {
    DefaultExecutors executors = new DefaultExecutors();
    Function<DefaultExecutors, Object> pick =
        poolName.equals("async") ? DefaultExecutors::async : DefaultExecutors::storeIo;
    ThreadPoolExecutor pool = (ThreadPoolExecutor) pick.apply(executors);
    ReentrantLock executorsLock = executorsLock(pool);
    CountDownLatch held = new CountDownLatch(1);
    CountDownLatch letGo = new CountDownLatch(1);
    Thread holder =
        new Thread(
            () -> {
              executorsLock.lock();
              try {
                held.countDown();
                await(letGo);
              } finally {
                executorsLock.unlock();
              }
            },
            "holds-the-executors-lock");
    try {
      useEveryThreadOnce(pool);
      // the pool stays idle past its keep-alive (a minute by default, a millisecond here)
      pool.setKeepAliveTime(1, TimeUnit.MILLISECONDS);
      if (pool.allowsCoreThreadTimeOut()) {
        awaitIdledOut(pool);
      }
      holder.start();
      assertThat(held.await(30, TimeUnit.SECONDS)).isTrue();

      CountDownLatch ran = new CountDownLatch(1);
      CompletableFuture<Void> handOff =
          CompletableFuture.runAsync(() -> pool.execute(ran::countDown));

      assertThat(ran.await(10, TimeUnit.SECONDS))
          .as("the hand-off ran while another thread held the executor's lock")
          .isTrue();
      handOff.get(10, TimeUnit.SECONDS);
    } finally {
      letGo.countDown();
      holder.join(30_000);
      executors.shutdown(10_000);
    }
  }

  /** Runs as many tasks at once as the pool has threads, as a burst of requests does. */
  private static void useEveryThreadOnce(ThreadPoolExecutor pool) throws InterruptedException {
    int threads = pool.getMaximumPoolSize();
    CountDownLatch started = new CountDownLatch(threads);
    CountDownLatch release = new CountDownLatch(1);
    for (int i = 0; i < threads; i++) {
      pool.execute(
          () -> {
            started.countDown();
            await(release);
          });
    }
    assertThat(started.await(30, TimeUnit.SECONDS)).as("every thread started").isTrue();
    release.countDown();
  }

  /** Waits, at most 30 seconds, until every idle thread of the pool has ended. */
  private static void awaitIdledOut(ThreadPoolExecutor pool) throws InterruptedException {
    Poll.within(Duration.ofSeconds(30))
        .every(Duration.ofMillis(10))
        .until("no threads left after the keep-alive", () -> pool.getPoolSize() == 0);
  }

  /** The executor's own lock (needs {@code --add-opens java.base/java.util.concurrent}). */
  private static ReentrantLock executorsLock(ThreadPoolExecutor pool) throws Exception {
    java.lang.reflect.Field field = ThreadPoolExecutor.class.getDeclaredField("mainLock");
    field.setAccessible(true);
    return (ReentrantLock) field.get(pool);
  }

  private static void await(CountDownLatch latch) {
    try {
      latch.await(60, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
