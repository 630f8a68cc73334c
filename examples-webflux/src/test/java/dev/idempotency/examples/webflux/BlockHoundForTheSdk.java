package dev.idempotency.examples.webflux;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ExtensionContext.Namespace;
import org.junit.jupiter.api.extension.ExtensionContext.Store.CloseableResource;
import org.junit.platform.launcher.TestExecutionListener;
import org.junit.platform.launcher.TestPlan;
import reactor.blockhound.BlockHound;
import reactor.blockhound.BlockingMethod;
import reactor.blockhound.BlockingOperationError;

/**
 * BlockHound in the example's tests, as in the starter's: a blocking call made from the SDK's code
 * on a non-blocking thread (a Reactor Netty or Lettuce event loop, a Reactor {@code parallel}
 * worker) fails the test it was made in, or the class when it came after the class's last test, or
 * the test plan's JUnit Jupiter run when it came after the plan's last class.
 *
 * <p>Registered twice in {@code META-INF/services} of the test resources (for this module and its
 * re-run on Boot 3.5, {@code examples-webflux-boot3-tests}): as a launcher {@link
 * TestExecutionListener}, it installs BlockHound when the test JVM starts its test plan, before any
 * test code runs (BlockHound never checks a thread that ran its instrumented code while it was
 * being installed); as a JUnit Jupiter extension, auto-detected ({@code
 * junit-platform.properties}), it checks every class. The JVM needs {@code
 * -XX:+AllowRedefinitionToAddDeleteMethods} (the pom's {@code argLine}).
 *
 * <p>A call is the SDK's when, walking from the blocking call towards the thread's start, a frame
 * of {@code dev.idempotency} other than this example's own comes before WebFlux's dispatcher (which
 * runs the application's handler: a handler that blocks does so on its own account). A listener or
 * observer of the guard that blocks counts: the SDK calls it on the event loop. A wait inside
 * Lettuce's own {@code SharedLock} is not counted (the starter's open finding: Lettuce makes a
 * writer wait briefly while it reconnects or flushes, even for the SDK's non-blocking claim).
 *
 * <p>Calls are remembered, never thrown from the blocking call: an error thrown out of a lock's
 * park leaves the waiting thread's node in the lock's queue, and the lock's later waiters hang.
 */
public final class BlockHoundForTheSdk
    implements TestExecutionListener, BeforeAllCallback, AfterEachCallback, AfterAllCallback {

  private static final Namespace NAMESPACE = Namespace.create(BlockHoundForTheSdk.class);
  private static final List<BlockingOperationError> FROM_THE_SDK = new CopyOnWriteArrayList<>();
  private static boolean installed;
  private static volatile String lastClass = "no test class";

  /** Called by the {@link java.util.ServiceLoader}. */
  public BlockHoundForTheSdk() {}

  /** Whether BlockHound is installed in this JVM. */
  static synchronized boolean installed() {
    return installed;
  }

  @Override
  public void testPlanExecutionStarted(TestPlan plan) {
    install();
  }

  @Override
  public void beforeAll(ExtensionContext context) {
    install(); // a no-op once the listener installed it
    lastClass = context.getRequiredTestClass().getName();
    context
        .getRoot()
        .getStore(NAMESPACE)
        .getOrComputeIfAbsent(CheckWhenThePlanEnds.class, type -> new CheckWhenThePlanEnds());
  }

  @Override
  public void afterEach(ExtensionContext context) {
    failOnCalls("in " + context.getDisplayName());
  }

  @Override
  public void afterAll(ExtensionContext context) {
    failOnCalls("after the last test of " + context.getRequiredTestClass().getName());
  }

  /**
   * Takes out the blocking calls the SDK made on non-blocking threads, not yet checked, for a test
   * that makes such calls on purpose to check them itself.
   */
  static List<BlockingOperationError> takeFromTheSdk() {
    List<BlockingOperationError> calls = new ArrayList<>(FROM_THE_SDK);
    FROM_THE_SDK.removeAll(calls);
    return calls;
  }

  private static synchronized void install() {
    if (!installed) {
      BlockHound.install(builder -> builder.blockingMethodCallback(BlockHoundForTheSdk::remember));
      installed = true;
    }
  }

  private static void remember(BlockingMethod method) {
    BlockingOperationError call = new BlockingOperationError(method);
    if (fromTheSdk(call.getStackTrace())) {
      FROM_THE_SDK.add(call);
    }
  }

  private static boolean fromTheSdk(StackTraceElement[] stack) {
    for (StackTraceElement frame : stack) {
      String name = frame.getClassName();
      if (name.startsWith("org.springframework.web.reactive.")
          || name.startsWith("io.lettuce.core.protocol.SharedLock")) {
        return false;
      }
      if (name.startsWith("dev.idempotency.") && !name.startsWith("dev.idempotency.examples.")) {
        return true;
      }
    }
    return false;
  }

  /** Fails, naming each call with its whole stack, when the SDK blocked since the last check. */
  private static void failOnCalls(String when) {
    List<BlockingOperationError> calls = takeFromTheSdk();
    if (calls.isEmpty()) {
      return;
    }
    StringWriter text = new StringWriter();
    PrintWriter out = new PrintWriter(text);
    out.println(
        calls.size() + " blocking call(s) of the SDK on a non-blocking thread " + when + ":");
    for (BlockingOperationError call : calls) {
      call.printStackTrace(out);
    }
    out.flush();
    throw new AssertionError(text.toString());
  }

  /**
   * Put in JUnit Jupiter's root store by the plan's first class, so closed when Jupiter's run of
   * the plan ends, after every other value there: the last class of a surefire fork has no next
   * class, and a launcher listener's failure at the plan's end would only be logged.
   */
  private static final class CheckWhenThePlanEnds implements CloseableResource, AutoCloseable {

    @Override
    public void close() {
      failOnCalls("after " + lastClass + ", the last class of the test plan, ended");
    }
  }
}
