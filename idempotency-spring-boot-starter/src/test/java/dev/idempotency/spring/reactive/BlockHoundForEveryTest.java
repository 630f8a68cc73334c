package dev.idempotency.spring.reactive;

import org.junit.platform.launcher.TestExecutionListener;
import org.junit.platform.launcher.TestPlan;

/**
 * Installs BlockHound ({@link BlockingCalls#install()}) when the test JVM starts executing its test
 * plan, before any test code runs. Registered in {@code META-INF/services} of the test resources,
 * for the starter's tests and their re-run on Boot 4.0 ({@code spring-boot-4-tests}); {@link
 * BlockHoundCheckEveryClass} checks every class.
 *
 * <p>Not when the launcher session opens: surefire also opens one in Maven's own JVM to find the
 * test classes it hands to its forks, where BlockHound cannot install (no {@code
 * -XX:+AllowRedefinitionToAddDeleteMethods}); only a test JVM executes a test plan.
 *
 * <p>Installed before any test, because BlockHound never checks a thread that ran its instrumented
 * code while it was being installed: a Reactor {@code parallel} worker or a Netty event loop that
 * an earlier class left busy, when the first reactive class installed it, was never checked.
 */
public final class BlockHoundForEveryTest implements TestExecutionListener {

  /** Called by the {@link java.util.ServiceLoader}. */
  public BlockHoundForEveryTest() {}

  @Override
  public void testPlanExecutionStarted(TestPlan plan) {
    BlockingCalls.install();
  }
}
