package dev.idempotency.spring.reactive;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import reactor.blockhound.BlockHound;
import reactor.blockhound.BlockingOperationError;

/**
 * BlockHound, installed once per JVM for the reactive tests: a blocking call on a non-blocking
 * thread (a Netty event loop, Reactor's {@code parallel} workers) made from the SDK's own code
 * fails with {@link BlockingOperationError} and is remembered, so that a test can assert that none
 * happened even where the error was swallowed on the way.
 */
public final class BlockingCalls {

  private static final List<BlockingOperationError> FROM_THE_SDK = new CopyOnWriteArrayList<>();
  private static final List<BlockingOperationError> IN_LETTUCE_LOCK = new CopyOnWriteArrayList<>();
  private static boolean installed;

  private BlockingCalls() {}

  /** Installs BlockHound, once. */
  public static synchronized void install() {
    if (installed) {
      return;
    }
    BlockHound.install(
        builder ->
            builder.blockingMethodCallback(
                method -> {
                  BlockingOperationError error = new BlockingOperationError(method);
                  if (inLettucesLock(error.getStackTrace())) {
                    // remembered, never thrown: see inLettucesLock
                    IN_LETTUCE_LOCK.add(error);
                    return;
                  }
                  if (fromTheSdk(error.getStackTrace())) {
                    FROM_THE_SDK.add(error);
                    throw error;
                  }
                }));
    installed = true;
  }

  /** The blocking calls the SDK made on non-blocking threads since the JVM started. */
  public static List<BlockingOperationError> fromTheSdk() {
    return List.copyOf(FROM_THE_SDK);
  }

  /**
   * The parks inside Lettuce's own {@code SharedLock} on non-blocking threads since the JVM started
   * (an open finding, not failed on): Lettuce's endpoint makes a writer wait briefly while another
   * thread holds its exclusive lock (a reconnect, a flush), even when the command comes from the
   * SDK's non-blocking claim. Throwing BlockHound's error from inside that lock left Lettuce's lock
   * state broken, and a later request on the connection waited forever (a hung build on Boot 4.0,
   * WebFluxRedisEndpointTest); so such parks are remembered here instead.
   */
  public static List<BlockingOperationError> inLettucesLock() {
    return List.copyOf(IN_LETTUCE_LOCK);
  }

  /** Whether the blocking call is a wait inside Lettuce's {@code SharedLock}. */
  private static boolean inLettucesLock(StackTraceElement[] stack) {
    for (StackTraceElement frame : stack) {
      String name = frame.getClassName();
      if (name.startsWith("io.lettuce.core.protocol.SharedLock")) {
        return true;
      }
      if (name.startsWith("dev.idempotency.")) {
        return false;
      }
    }
    return false;
  }

  /**
   * Whether the blocking call is the SDK's: walking from the blocking call towards the thread's
   * start, a frame of the SDK's main code comes before WebFlux's {@code DispatcherHandler}. Code
   * that the dispatcher runs (argument resolution, validation, the application's handler) blocks on
   * its own account, even when the SDK's filter subscribed it on an event loop, as WebFlux itself
   * would; the tests' own applications and support are not the SDK either.
   */
  private static boolean fromTheSdk(StackTraceElement[] stack) {
    for (StackTraceElement frame : stack) {
      String name = frame.getClassName();
      if (name.startsWith("org.springframework.web.reactive.")) {
        return false;
      }
      if (name.startsWith("dev.idempotency.")
          && !name.startsWith("dev.idempotency.spring.reactive.")
          && !name.startsWith("dev.idempotency.spring.fluxapp.")
          && !name.startsWith("dev.idempotency.spring.app.")
          && !name.startsWith("dev.idempotency.testservers.")) {
        return true;
      }
    }
    return false;
  }
}
