package dev.idempotency.spring;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Import;
import org.springframework.scheduling.annotation.Async;
import org.springframework.scheduling.annotation.EnableAsync;

/**
 * Issue 37: an {@code @Async} {@link Idempotent} method returning a {@code CompletableFuture}, run
 * on Boot's task executor (one thread here). Spring's async advice is added in front of the
 * guard's, so the key is claimed on the executor thread when the task begins: a task cancelled
 * while it waits in the executor's queue never claims its key (the retry sends once), and a caller
 * that cancels after the task began only stops waiting (the send goes on, its outcome is recorded
 * and a repeat replays it).
 */
@SpringBootTest(
    classes = AsyncIdempotentMethodTest.AsyncApp.class,
    webEnvironment = SpringBootTest.WebEnvironment.NONE,
    properties = {
      "idempotency.store=memory",
      "spring.task.execution.pool.core-size=1",
      "spring.task.execution.pool.max-size=1"
    })
class AsyncIdempotentMethodTest {

  @Autowired AsyncNotifier notifier;
  @Autowired SendLog log;
  @Autowired Blocker blocker;

  @Test
  void aTaskCancelledInTheExecutorQueueClaimsNothingAndTheRetrySendsOnce() throws Exception {
    String orderId = "queued-" + System.nanoTime();
    int sendsBefore = log.sends.get();
    CountDownLatch release = new CountDownLatch(1);
    CountDownLatch started = new CountDownLatch(1);
    CompletableFuture<Void> blocking = blocker.block(started, release);
    assertThat(started.await(30, TimeUnit.SECONDS))
        .as("the executor's only thread is busy")
        .isTrue();

    CompletableFuture<String> queued = notifier.send(orderId, null);
    assertThat(queued.cancel(true)).as("cancelled while queued").isTrue();
    release.countDown();
    blocking.get(30, TimeUnit.SECONDS);
    blocker.idle().get(30, TimeUnit.SECONDS); // the queue has drained past the cancelled task

    assertThat(log.sends.get() - sendsBefore).as("the cancelled task never ran").isZero();
    assertThat(notifier.send(orderId, null).get(30, TimeUnit.SECONDS))
        .as("the retry is not refused as in progress")
        .isEqualTo("receipt-" + orderId);
    assertThat(notifier.send(orderId, null).get(30, TimeUnit.SECONDS))
        .isEqualTo("receipt-" + orderId);
    assertThat(log.sends.get() - sendsBefore).as("one send").isEqualTo(1);
  }

  @Test
  void aCallerThatCancelsAfterTheTaskBeganOnlyStopsWaiting() throws Exception {
    String orderId = "started-" + System.nanoTime();
    int sendsBefore = log.sends.get();
    CountDownLatch release = new CountDownLatch(1);
    log.entered = new CountDownLatch(1);

    CompletableFuture<String> first = notifier.send(orderId, release);
    assertThat(log.entered.await(30, TimeUnit.SECONDS)).as("the send began").isTrue();
    first.cancel(true);
    release.countDown();

    // the repeat waits for the first call (in flight) and replays its stored result
    assertThat(notifier.send(orderId, null).get(30, TimeUnit.SECONDS))
        .isEqualTo("receipt-" + orderId);
    assertThat(log.sends.get() - sendsBefore).as("one send").isEqualTo(1);
  }

  @SpringBootConfiguration
  @EnableAutoConfiguration
  @EnableAsync
  @Import({AsyncNotifier.class, SendLog.class, Blocker.class})
  static class AsyncApp {}

  /** What the notifier did (a bean of its own: the guarded notifier is a proxy). */
  static class SendLog {
    final AtomicInteger sends = new AtomicInteger();
    volatile CountDownLatch entered = new CountDownLatch(1);
  }

  static class AsyncNotifier {
    private final SendLog log;

    AsyncNotifier(SendLog log) {
      this.log = log;
    }

    /** Waits for {@code release}, if given, after counting the send (the provider has it). */
    @Async
    @Idempotent(key = "#orderId")
    public CompletableFuture<String> send(String orderId, CountDownLatch release)
        throws InterruptedException {
      log.sends.incrementAndGet();
      log.entered.countDown();
      if (release != null) {
        release.await(30, TimeUnit.SECONDS);
      }
      return CompletableFuture.completedFuture("receipt-" + orderId);
    }
  }

  static class Blocker {
    @Async
    public CompletableFuture<Void> block(CountDownLatch started, CountDownLatch release)
        throws InterruptedException {
      started.countDown();
      release.await(60, TimeUnit.SECONDS);
      return CompletableFuture.completedFuture(null);
    }

    @Async
    public CompletableFuture<Void> idle() {
      return CompletableFuture.completedFuture(null);
    }
  }
}
