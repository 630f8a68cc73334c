package dev.idempotency.spring.reactive;

import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ExtensionContext.Namespace;
import org.junit.jupiter.api.extension.ExtensionContext.Store.CloseableResource;

/**
 * Fails every test class of the starter's tests, not only those that check for themselves, on a
 * blocking call of the SDK on a non-blocking thread ({@link BlockingCalls}): registered for every
 * class by JUnit's extension auto-detection ({@code junit-platform.properties} and {@code
 * META-INF/services} of the test resources; for the starter's tests and their re-run on Boot 4.0).
 *
 * <ul>
 *   <li>After each test: the calls made since the last check fail that test.
 *   <li>After the class: the calls made after its last test, in its {@code @AfterAll} methods and
 *       while its Spring application shut down ({@link CloseReactiveApplicationAfterClass}) fail
 *       the class.
 *   <li>When a top-level class starts: calls made after the class before it was checked (a late
 *       callback of its application, on a thread it left running) fail this class's start, with a
 *       message naming the class they came after, as not this class's own.
 *   <li>When the test plan's JUnit Jupiter run ends: calls made after the last class of the plan
 *       was checked (the last class of a surefire fork has no next class) fail the run, reported as
 *       a failure of the "JUnit Jupiter" engine, with a message naming that last class. The check
 *       is a resource in the engine's root store, which Jupiter closes when its run ends: a {@link
 *       org.junit.platform.launcher.TestExecutionListener}'s failure at the plan's end would only
 *       be logged by the launcher, not reported as a failure.
 * </ul>
 *
 * <p>A class that checks for itself ({@link BlockingCalls#assertNoneFromTheSdk()}) takes out what
 * it reports, so a call fails once.
 */
public final class BlockHoundCheckEveryClass
    implements BeforeAllCallback, AfterEachCallback, AfterAllCallback {

  private static final Namespace NAMESPACE = Namespace.create(BlockHoundCheckEveryClass.class);

  /** Called by the {@link java.util.ServiceLoader}. */
  public BlockHoundCheckEveryClass() {}

  @Override
  public void beforeAll(ExtensionContext context) {
    if (topLevel(context)) {
      context
          .getRoot()
          .getStore(NAMESPACE)
          .getOrComputeIfAbsent(CheckWhenThePlanEnds.class, type -> new CheckWhenThePlanEnds());
      BlockingCalls.classStarted(context.getRequiredTestClass().getName());
    }
  }

  @Override
  public void afterEach(ExtensionContext context) {
    BlockingCalls.assertNoneFromTheSdk();
  }

  @Override
  public void afterAll(ExtensionContext context) {
    BlockingCalls.assertNoneFromTheSdk();
  }

  private static boolean topLevel(ExtensionContext context) {
    return !context.getRequiredTestClass().isAnnotationPresent(Nested.class);
  }

  /**
   * Put in the root store when the first class of a test plan starts (so closed after every other
   * value of the root store): closed when JUnit Jupiter's run of the plan ends, it fails that run
   * on the calls made after the plan's last class was checked.
   */
  private static final class CheckWhenThePlanEnds implements CloseableResource, AutoCloseable {

    @Override
    public void close() {
      BlockingCalls.planEnded();
    }
  }
}
