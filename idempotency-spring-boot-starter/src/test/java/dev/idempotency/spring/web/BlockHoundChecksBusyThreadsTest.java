package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.spring.reactive.BlockingCalls;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * BlockHound checks Reactor's {@code parallel} workers that were already busy when a test class
 * first asked for it ({@link BlockingCalls#install()}), as a Netty event loop or a timer left
 * running by an earlier class would be. BlockHound never checks a thread that ran its instrumented
 * code while it was being installed, so it is installed when the test JVM starts executing its
 * tests, before any test code runs ({@code BlockHoundForEveryTest}). With BlockHound installed by
 * the first class that asked (as before), this test failed when it was the first class of its JVM:
 * the sleep on the busy worker was not seen. This class is in the SDK's package {@code
 * dev.idempotency.spring.web}, so its frames count as the SDK's.
 */
class BlockHoundChecksBusyThreadsTest {

  private static final Duration BOUND = Duration.ofSeconds(30);

  @Test
  void aParallelWorkerBusyBeforeTheClassAskedForBlockHoundIsStillChecked() throws Exception {
    List<Disposable> ticking = new ArrayList<>();
    CountDownLatch ticked = new CountDownLatch(Schedulers.DEFAULT_POOL_SIZE);
    try {
      // every parallel worker wakes every millisecond, before and while BlockHound is asked for
      for (int i = 0; i < Schedulers.DEFAULT_POOL_SIZE; i++) {
        Scheduler.Worker worker = Schedulers.parallel().createWorker();
        ticking.add(worker);
        CountDownLatch first = new CountDownLatch(1);
        worker.schedulePeriodically(
            () -> {
              if (first.getCount() > 0) {
                first.countDown();
                ticked.countDown();
              }
            },
            0,
            1,
            TimeUnit.MILLISECONDS);
      }
      assertThat(ticked.await(BOUND.toSeconds(), TimeUnit.SECONDS))
          .as("every parallel worker ticked")
          .isTrue();
      BlockingCalls.install();
      BlockingCalls.assertNoneFromTheSdk(); // none left over from an earlier test class

      String result =
          Mono.fromCallable(BlockHoundChecksBusyThreadsTest::sleepAMoment)
              .subscribeOn(Schedulers.parallel())
              .block(BOUND);

      assertThat(result).isEqualTo("slept");
      assertThatThrownBy(BlockingCalls::assertNoneFromTheSdk)
          .as("the sleep on a parallel worker that was busy before is reported")
          .isInstanceOf(AssertionError.class)
          .hasMessageContaining("Thread.sleep")
          .hasMessageContaining(BlockHoundChecksBusyThreadsTest.class.getName() + ".sleepAMoment");
    } finally {
      ticking.forEach(Disposable::dispose);
    }
  }

  private static String sleepAMoment() throws InterruptedException {
    Thread.sleep(1);
    return "slept";
  }
}
