package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.spring.reactive.BlockingCalls;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * The reactive tests' BlockHound set-up ({@link BlockingCalls}): a blocking call of the SDK on a
 * non-blocking thread still fails the check, with its stack, and the call is never broken off by a
 * thrown error, which left a lock's queue broken. This class is in the SDK's package {@code
 * dev.idempotency.spring.web}, so its frames count as the SDK's, as the WebFlux filter's do.
 */
class BlockingCallsTest {

  private static final Duration BOUND = Duration.ofSeconds(30);

  @BeforeAll
  static void blockHound() {
    BlockingCalls.install();
    BlockingCalls.assertNoneFromTheSdk(); // none left over from an earlier test class
  }

  @Test
  void aBlockingCallOfTheSdkOnAnEventLoopLikeThreadFailsTheCheckOnceWithItsStack() {
    String result =
        Mono.fromCallable(this::sleepAMoment).subscribeOn(Schedulers.parallel()).block(BOUND);

    assertThat(result).as("the call went on, it was not broken off").isEqualTo("slept");
    assertThatThrownBy(BlockingCalls::assertNoneFromTheSdk)
        .isInstanceOf(AssertionError.class)
        .hasMessageContaining("1 blocking call(s) of the SDK on a non-blocking thread")
        .hasMessageContaining("Thread.sleep")
        .hasMessageContaining(BlockingCallsTest.class.getName() + ".sleepAMoment");
    BlockingCalls.assertNoneFromTheSdk(); // reported once, not again in the next test
  }

  /**
   * The hung CI run's mechanism: a Netty event loop parked, from the SDK's code, on a lock (there
   * the queue lock of the guard's async executor) while another thread held it. When BlockHound's
   * error was thrown out of that park, the parked thread's place in the lock's queue stayed, and
   * every thread that queued behind it waited forever; remembered instead, the lock goes on.
   */
  @Test
  void aLockTheSdkParkedOnFromANonBlockingThreadStillWakesTheThreadsQueuedBehindIt()
      throws Exception {
    ReentrantLock lock = new ReentrantLock();
    AtomicReference<Thread> nonBlocking = new AtomicReference<>();
    lock.lock();
    CompletableFuture<String> sdkCall;
    CompletableFuture<String> later = new CompletableFuture<>();
    try {
      sdkCall =
          Mono.fromCallable(() -> lockAndUnlock(lock, nonBlocking, "the SDK's call"))
              .subscribeOn(Schedulers.parallel())
              .toFuture();
      awaitTrue(
          () -> nonBlocking.get() != null && lock.hasQueuedThread(nonBlocking.get()),
          "the non-blocking thread queued on the lock");
      Thread behind =
          new Thread(
              () -> {
                try {
                  later.complete(lockAndUnlock(lock, new AtomicReference<>(), "a later waiter"));
                } catch (RuntimeException e) {
                  later.completeExceptionally(e);
                }
              },
              "queued-behind");
      behind.setDaemon(true);
      behind.start();
      awaitTrue(() -> lock.hasQueuedThread(behind), "a later thread queued behind it");
    } finally {
      lock.unlock();
    }

    assertThat(later.get(BOUND.toSeconds(), TimeUnit.SECONDS))
        .as("the thread queued behind the parked non-blocking thread got the lock")
        .isEqualTo("a later waiter");
    assertThat(sdkCall.get(BOUND.toSeconds(), TimeUnit.SECONDS)).isEqualTo("the SDK's call");
    assertThatThrownBy(BlockingCalls::assertNoneFromTheSdk)
        .hasMessageContaining("Unsafe#park")
        .hasMessageContaining(BlockingCallsTest.class.getName());
  }

  /**
   * A park inside Lettuce's {@code SharedLock} under the SDK's claim is remembered as Lettuce's (an
   * open finding), not failed as the SDK's. The stack is the one BlockHound's callback saw in a run
   * on Boot 4.0: the callback's own frames come first, and they are not the SDK's.
   */
  @Test
  void aParkInLettucesSharedLockUnderTheSdksClaimIsLettucesNotTheSdks() {
    StackTraceElement[] stack = {
      frame(BlockingCalls.class.getName(), "lambda$install$0"),
      frame("reactor.blockhound.BlockHound$Builder", "lambda$install$8"),
      frame("reactor.blockhound.BlockHoundRuntime", "checkBlocking"),
      frame("jdk.internal.misc.Unsafe", "park"),
      frame("java.util.concurrent.locks.LockSupport", "park"),
      frame("java.util.concurrent.locks.ReentrantLock", "lock"),
      frame("io.lettuce.core.protocol.SharedLock", "incrementWriters"),
      frame("io.lettuce.core.protocol.DefaultEndpoint", "write"),
      frame("dev.idempotency.redis.LettuceCommands", "setGet"),
      frame("dev.idempotency.AsyncGuardedCall", "attempt"),
      frame("dev.idempotency.spring.web.IdempotentEndpointWebFilter", "lambda$claimed$17"),
      frame("reactor.netty.http.server.HttpServerOperations", "onInboundNext")
    };

    assertThat(BlockingCalls.inLettucesLock(stack)).isTrue();
  }

  private static StackTraceElement frame(String className, String method) {
    return new StackTraceElement(className, method, null, -1);
  }

  private String sleepAMoment() throws InterruptedException {
    Thread.sleep(1);
    return "slept";
  }

  private static String lockAndUnlock(
      ReentrantLock lock, AtomicReference<Thread> thread, String result) {
    thread.set(Thread.currentThread());
    lock.lock();
    try {
      return result;
    } finally {
      lock.unlock();
    }
  }

  private static void awaitTrue(BooleanSupplier condition, String what)
      throws InterruptedException {
    long deadline = System.nanoTime() + BOUND.toNanos();
    while (!condition.getAsBoolean()) {
      assertThat(System.nanoTime()).as("waited 30 s for: " + what).isLessThan(deadline);
      Thread.sleep(5);
    }
  }
}
