package dev.idempotency.spring.web;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import reactor.core.scheduler.Schedulers;

/**
 * A sample test class for {@link BlockHoundUncheckedClassProbeTest} (not run by surefire: its name
 * does not end in Test): its test passes and leaves a thread behind that, once {@link #release} is
 * counted down (after the class ended), blocks on a Reactor {@code parallel} worker in a frame of
 * the SDK's package (a late callback of an application, on a thread the class left running).
 */
class LateBlockingSample {

  static volatile CountDownLatch release = new CountDownLatch(1);
  static volatile CountDownLatch blocked = new CountDownLatch(1);
  static final AtomicReference<String> blockedOn = new AtomicReference<>();

  @Test
  void leavesATaskBehind() {
    CountDownLatch releaseIt = release;
    CountDownLatch done = blocked;
    Thread waiting =
        new Thread(
            () -> {
              try {
                releaseIt.await(); // on a blocking thread of its own
              } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
              }
              Schedulers.parallel()
                  .schedule(
                      () -> {
                        try {
                          sleepAMoment();
                        } catch (InterruptedException e) {
                          Thread.currentThread().interrupt();
                        } finally {
                          done.countDown();
                        }
                      });
            },
            "late-blocking-sample");
    waiting.setDaemon(true);
    waiting.start();
  }

  private static void sleepAMoment() throws InterruptedException {
    blockedOn.set(Thread.currentThread().getName());
    Thread.sleep(1);
  }
}
