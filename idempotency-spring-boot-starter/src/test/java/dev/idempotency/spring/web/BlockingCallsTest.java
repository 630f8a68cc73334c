package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.spring.reactive.BlockingCalls;
import java.time.Duration;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.AbstractQueuedSynchronizer;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import reactor.core.scheduler.NonBlocking;

/**
 * The reactive tests' BlockHound set-up ({@link BlockingCalls}): a blocking call of the SDK on a
 * non-blocking thread still fails the check, with its stack, and the call is never broken off by a
 * thrown error, which left a lock's queue broken. This class is in the SDK's package {@code
 * dev.idempotency.spring.web}, so its frames count as the SDK's, as the WebFlux filter's do.
 *
 * <p>The calls are made on a non-blocking thread of the test's own ({@link NonBlockingThread}),
 * started after BlockHound was installed, not on Reactor's shared {@code parallel} workers: a
 * thread that ran while BlockHound was being installed (by an earlier class in the same JVM) is
 * never checked by it (see {@link BlockingCalls}). With a {@code parallel} worker busy during the
 * installation (a {@code Flux.interval} of 1 ms), the lock case failed in every run as it failed in
 * CI ("Expecting code to raise a throwable"): its park landed on that worker and was not seen.
 */
class BlockingCallsTest {

  private static final Duration BOUND = Duration.ofSeconds(30);

  @BeforeAll
  static void blockHound() {
    BlockingCalls.install();
    BlockingCalls.assertNoneFromTheSdk(); // none left over from an earlier test class
  }

  @Test
  void aBlockingCallOfTheSdkOnAnEventLoopLikeThreadFailsTheCheckOnceWithItsStack()
      throws Exception {
    String result =
        NonBlockingThread.call(this::sleepAMoment).get(BOUND.toSeconds(), TimeUnit.SECONDS);

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
    lock.lock();
    NonBlockingThread nonBlocking =
        NonBlockingThread.start(() -> lockAndUnlock(lock, "the SDK's call"));
    CompletableFuture<String> later = new CompletableFuture<>();
    try {
      // parked, not only queued: a thread queued on the lock takes it without parking when it is
      // let go first, and then there is no park to report
      awaitTrue(() -> parkedOn(lock, nonBlocking), "the non-blocking thread parked on the lock");
      Thread behind =
          new Thread(
              () -> {
                try {
                  later.complete(lockAndUnlock(lock, "a later waiter"));
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
    assertThat(nonBlocking.result.get(BOUND.toSeconds(), TimeUnit.SECONDS))
        .isEqualTo("the SDK's call");
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

  private static String lockAndUnlock(ReentrantLock lock, String result) {
    lock.lock();
    try {
      return result;
    } finally {
      lock.unlock();
    }
  }

  /**
   * Whether the thread waits inside its park on the lock: queued, parked by the lock's queue (its
   * blocker), and waiting, which it is only once it is in the park itself, after BlockHound's check
   * on the way in.
   */
  private static boolean parkedOn(ReentrantLock lock, Thread thread) {
    return lock.hasQueuedThread(thread)
        && LockSupport.getBlocker(thread) instanceof AbstractQueuedSynchronizer
        && thread.getState() == Thread.State.WAITING;
  }

  private static void awaitTrue(BooleanSupplier condition, String what)
      throws InterruptedException {
    long deadline = System.nanoTime() + BOUND.toNanos();
    while (!condition.getAsBoolean()) {
      assertThat(System.nanoTime()).as("waited 30 s for: " + what).isLessThan(deadline);
      Thread.sleep(5);
    }
  }

  /**
   * A non-blocking thread as Reactor marks its own ({@link NonBlocking}), which BlockHound's
   * Reactor integration checks: one per call, started by the test after BlockHound was installed.
   */
  private static final class NonBlockingThread extends Thread implements NonBlocking {

    final CompletableFuture<String> result = new CompletableFuture<>();
    private final Callable<String> call;

    private NonBlockingThread(Callable<String> call) {
      super("blocking-calls-test-non-blocking");
      setDaemon(true);
      this.call = call;
    }

    static NonBlockingThread start(Callable<String> call) {
      NonBlockingThread thread = new NonBlockingThread(call);
      thread.start();
      return thread;
    }

    static CompletableFuture<String> call(Callable<String> call) {
      return start(call).result;
    }

    @Override
    public void run() {
      try {
        result.complete(call.call());
      } catch (Exception | Error e) {
        result.completeExceptionally(e);
      }
    }
  }
}
