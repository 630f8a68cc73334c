package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

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

  private static void await(CountDownLatch latch) {
    try {
      latch.await(60, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
