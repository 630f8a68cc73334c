package dev.idempotency.spring.reactive;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import reactor.blockhound.BlockHound;
import reactor.blockhound.BlockingOperationError;

/**
 * BlockHound, installed once per JVM for the reactive tests: every blocking call on a non-blocking
 * thread (a Netty event loop, Reactor's {@code parallel} workers) is remembered with its stack, and
 * never thrown. A test fails afterwards, in {@link #assertNoneFromTheSdk()}, when one of them was
 * made from the SDK's own code.
 *
 * <p>Never thrown, because the call that blocks is usually a park inside a lock's acquire (Spring's
 * {@code SingletonSupplier}, Lettuce's {@code SharedLock}, the {@code LinkedBlockingQueue} of an
 * executor a task is handed to), and an error thrown out of that park leaves the waiting thread's
 * node in the lock's queue for good: the lock's later waiters are never woken. A hung CI run (Boot
 * 4.0, {@code WebFluxRedisEndpointTest}) was that: BlockHound's error thrown from a Lettuce event
 * loop parked on the guard's async executor's queue lock left that executor's workers waiting
 * forever, and a response held for its outcome's write never ended.
 *
 * <p>A thread that runs BlockHound's instrumented code while BlockHound is being installed (about
 * 1.5 s) is never checked afterwards: BlockHound keeps each thread's state from its first check,
 * and during the installation that check takes only BlockHound's own test thread for non-blocking.
 * In a JVM where earlier test classes left a Reactor {@code parallel} worker or a Netty event loop
 * busy (a timer firing), that thread's blocking calls were not seen for the rest of the JVM. So
 * {@link BlockHoundForEveryTest} installs it when the test JVM starts executing its tests, before
 * any test code runs ({@code BlockHoundChecksBusyThreadsTest}); a class's own {@link #install()} is
 * then a no-op.
 *
 * <p>Every test class is checked, whether it checks for itself or not ({@link
 * BlockHoundCheckEveryClass}, registered for every class): the calls made during a test fail that
 * test, those made after its last test (its {@code @AfterAll}, its reactive application's shutdown)
 * fail the class, and those made after a class's last check and before the next class starts (a
 * late callback on a thread the class left running) fail the next class's start, with a message
 * naming the class they came after: they are not the next class's own; those made after the last
 * class of a test plan fail the plan's JUnit Jupiter run when it ends.
 */
public final class BlockingCalls {

  /** How many calls that are not the SDK's are kept, for a failure's message. */
  private static final int OTHERS_KEPT = 200;

  private static final List<BlockingOperationError> FROM_THE_SDK = new CopyOnWriteArrayList<>();
  private static final List<BlockingOperationError> IN_LETTUCE_LOCK = new CopyOnWriteArrayList<>();
  private static final List<BlockingOperationError> OTHERS = new CopyOnWriteArrayList<>();
  private static final AtomicInteger OTHERS_SEEN = new AtomicInteger();
  private static volatile String runningClass = "no test class";
  private static boolean installed;

  private BlockingCalls() {}

  /** Installs BlockHound, once. */
  public static synchronized void install() {
    if (installed) {
      return;
    }
    BlockHound.install(builder -> builder.blockingMethodCallback(BlockingCalls::remember));
    installed = true;
  }

  /** Whether BlockHound is installed in this JVM ({@link BlockHoundBeforeWebFlux} checks it). */
  public static synchronized boolean installed() {
    return installed;
  }

  /**
   * A top-level test class starts: fails when the SDK made blocking calls on non-blocking threads
   * after the last check, naming the class that ran before, whose calls they are.
   *
   * @throws AssertionError naming every such call and the class it came after
   */
  static void classStarted(String className) {
    String before = runningClass;
    runningClass = className;
    List<BlockingOperationError> calls = new ArrayList<>(FROM_THE_SDK);
    FROM_THE_SDK.removeAll(calls);
    if (!calls.isEmpty()) {
      throw new AssertionError(
          report(
              calls.size()
                  + " blocking call(s) of the SDK on a non-blocking thread after the last check of "
                  + before
                  + " (after its last test or its application's shutdown; not "
                  + className
                  + "'s own, which had not started):",
              calls));
    }
  }

  /**
   * The test plan's run of JUnit Jupiter ends: fails when the SDK made blocking calls on
   * non-blocking threads after the last check, naming the last class of the plan, whose calls they
   * are (a late callback on a thread it left running, which no next class would report).
   *
   * @throws AssertionError naming every such call and the class it came after
   */
  static void planEnded() {
    List<BlockingOperationError> calls = takeFromTheSdk();
    if (!calls.isEmpty()) {
      throw new AssertionError(
          report(
              calls.size()
                  + " blocking call(s) of the SDK on a non-blocking thread after the last check of "
                  + runningClass
                  + ", the last test class of the test plan (after its last test or its"
                  + " application's shutdown):",
              calls));
    }
  }

  /** BlockHound's callback: sorts the call and returns, so that the blocking call goes on. */
  static void remember(reactor.blockhound.BlockingMethod method) {
    BlockingOperationError call = new BlockingOperationError(method);
    StackTraceElement[] stack = call.getStackTrace();
    if (inLettucesLock(stack)) {
      IN_LETTUCE_LOCK.add(call);
    } else if (fromTheSdk(stack)) {
      FROM_THE_SDK.add(call);
    } else if (OTHERS_SEEN.getAndIncrement() < OTHERS_KEPT) {
      OTHERS.add(call);
    }
  }

  /**
   * Takes out the blocking calls the SDK made on non-blocking threads, not yet checked, for a test
   * that makes such calls on purpose (an application's listener that blocks) to check them itself.
   */
  public static List<BlockingOperationError> takeFromTheSdk() {
    List<BlockingOperationError> calls = new ArrayList<>(FROM_THE_SDK);
    FROM_THE_SDK.removeAll(calls);
    return calls;
  }

  /** The blocking calls the SDK made on non-blocking threads, not yet checked. */
  public static List<BlockingOperationError> fromTheSdk() {
    return List.copyOf(FROM_THE_SDK);
  }

  /**
   * Fails when the SDK made a blocking call on a non-blocking thread since the last check, with
   * each call's whole stack; the calls reported are then forgotten, so that one call fails one
   * test, not every test after it.
   *
   * @throws AssertionError naming every such call
   */
  public static void assertNoneFromTheSdk() {
    List<BlockingOperationError> calls = takeFromTheSdk();
    if (calls.isEmpty()) {
      return;
    }
    throw new AssertionError(
        report(
            calls.size()
                + " blocking call(s) of the SDK on a non-blocking thread ("
                + runningClass
                + "):",
            calls));
  }

  private static String report(String title, List<BlockingOperationError> calls) {
    StringWriter text = new StringWriter();
    PrintWriter out = new PrintWriter(text);
    out.println(title);
    for (BlockingOperationError call : calls) {
      out.println("on a thread:");
      call.printStackTrace(out);
    }
    out.flush();
    return text.toString();
  }

  /**
   * The parks inside Lettuce's own {@code SharedLock} on non-blocking threads since the JVM started
   * (an open finding, not failed on): Lettuce's endpoint makes a writer wait briefly while another
   * thread holds its exclusive lock (a reconnect, a flush), even when the command comes from the
   * SDK's non-blocking claim.
   */
  public static List<BlockingOperationError> inLettucesLock() {
    return List.copyOf(IN_LETTUCE_LOCK);
  }

  /**
   * Up to the first 200 blocking calls on non-blocking threads that were neither the SDK's nor in
   * Lettuce's lock (an application's handler, WebFlux's own), for a look when something hangs.
   */
  public static List<BlockingOperationError> others() {
    return List.copyOf(OTHERS);
  }

  /**
   * Whether the blocking call is a wait inside Lettuce's {@code SharedLock}: walking from the
   * blocking call towards the thread's start, Lettuce's lock comes before any frame of the SDK. The
   * frames of this callback itself, on top of the blocking call, are not the SDK's.
   */
  public static boolean inLettucesLock(StackTraceElement[] stack) {
    for (StackTraceElement frame : stack) {
      String name = frame.getClassName();
      if (name.startsWith("io.lettuce.core.protocol.SharedLock")) {
        return true;
      }
      if (name.startsWith("dev.idempotency.") && !name.startsWith(BlockingCalls.class.getName())) {
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
      if (name.contains("$$SpringCGLIB$$")) {
        continue; // a proxy Spring generated runs Spring's advice (validation), not the class's
        // code
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
