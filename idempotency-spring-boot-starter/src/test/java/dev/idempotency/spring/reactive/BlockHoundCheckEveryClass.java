package dev.idempotency.spring.reactive;

import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

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
 * </ul>
 *
 * <p>A class that checks for itself ({@link BlockingCalls#assertNoneFromTheSdk()}) takes out what
 * it reports, so a call fails once.
 */
public final class BlockHoundCheckEveryClass
    implements BeforeAllCallback, AfterEachCallback, AfterAllCallback {

  /** Called by the {@link java.util.ServiceLoader}. */
  public BlockHoundCheckEveryClass() {}

  @Override
  public void beforeAll(ExtensionContext context) {
    if (topLevel(context)) {
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
}
