package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;

import dev.idempotency.spring.reactive.BlockHoundCheckEveryClass;
import dev.idempotency.spring.reactive.BlockingCalls;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.engine.support.descriptor.ClassSource;
import org.junit.platform.launcher.LauncherDiscoveryRequest;
import org.junit.platform.launcher.TestExecutionListener;
import org.junit.platform.launcher.TestIdentifier;
import org.junit.platform.launcher.core.LauncherDiscoveryRequestBuilder;
import org.junit.platform.launcher.core.LauncherFactory;
import org.junit.platform.launcher.listeners.SummaryGeneratingListener;
import org.junit.platform.launcher.listeners.TestExecutionSummary;
import org.junit.platform.launcher.listeners.TestExecutionSummary.Failure;

/**
 * A blocking call of the SDK on a non-blocking thread fails a test class that does not call {@link
 * BlockingCalls#assertNoneFromTheSdk()} itself ({@link BlockHoundCheckEveryClass}, registered for
 * every class), whenever the class makes it: in a test, after its last test, or after it ended.
 * Runs, in this JVM and with what a test JVM registers (from {@code META-INF/services} and {@code
 * junit-platform.properties}), test plans of sample classes as surefire would, each followed by
 * {@link SampleAfterIt}, a class that checks nothing (an MVC or listener class). The samples block
 * in frames of the SDK's package, as a regression in the starter's WebFlux filter would, and check
 * only their own results, as most of the starter's WebFlux test classes do.
 *
 * <p>Found by probeY (BlockHoundUncheckedClassProbeTest, open finding): the check belonged to the
 * classes that called it, and a call in any other class, or after a class's last check, was only
 * logged as a WARN. The same on Boot 3.5 and Boot 4.0.
 */
class BlockHoundUncheckedClassProbeTest {

  @Test
  void aBlockingCallInATestOfAClassThatDoesNotCheckFailsThatTest() {
    TestExecutionSummary result = run(BlockingSampleWithoutCheck.class);

    assertThat(result.getTestsSucceededCount() + result.getTestsFailedCount())
        .as("both sample tests ran")
        .isEqualTo(2);
    assertThat(BlockingSampleWithoutCheck.blockedOn.get())
        .as("the sample blocked on a Netty event loop")
        .startsWith("reactor-http-");
    assertThat(failureOf(result, "servesItsResponse"))
        .as("the sample's test failed on its blocking call")
        .hasMessageContaining("Thread.sleep")
        .hasMessageContaining(BlockingSampleWithoutCheck.class.getName() + ".sleepAMoment");
    assertThat(result.getTotalFailureCount()).as("nothing else failed").isEqualTo(1);
  }

  @Test
  void aBlockingCallAfterTheLastTestOfAClassFailsTheClass() {
    TestExecutionSummary result = run(BlockingShutdownSample.class);

    assertThat(result.getTestsSucceededCount()).as("both sample tests passed").isEqualTo(2);
    assertThat(failureOf(result, BlockingShutdownSample.class.getName()))
        .as("the sample class failed on the blocking call of its shutdown")
        .hasMessageContaining("Thread.sleep")
        .hasMessageContaining(BlockingShutdownSample.class.getName() + ".sleepAMoment");
    assertThat(result.getTotalFailureCount()).as("nothing else failed").isEqualTo(1);
  }

  @Test
  void aBlockingCallAfterAClassEndedFailsTheNextClassNamingTheClassItCameAfter() {
    LateBlockingSample.release = new CountDownLatch(1);
    LateBlockingSample.blocked = new CountDownLatch(1);
    TestExecutionListener releaseWhenTheSampleEnded =
        new TestExecutionListener() {
          @Override
          public void executionFinished(TestIdentifier test, TestExecutionResult result) {
            if (isClass(test, LateBlockingSample.class)) {
              LateBlockingSample.release.countDown();
              await(LateBlockingSample.blocked);
            }
          }
        };

    TestExecutionSummary result = run(LateBlockingSample.class, releaseWhenTheSampleEnded);

    assertThat(LateBlockingSample.blockedOn.get())
        .as("the sample's late task blocked on a parallel worker")
        .startsWith("parallel-");
    assertThat(result.getTestsSucceededCount())
        .as("the sample's test passed; the next class's did not start")
        .isEqualTo(1);
    assertThat(failureOf(result, SampleAfterIt.class.getName()))
        .as("the next class's start failed, naming the class the call came after")
        .hasMessageContaining("after the last check of " + LateBlockingSample.class.getName())
        .hasMessageContaining("not " + SampleAfterIt.class.getName() + "'s own")
        .hasMessageContaining(LateBlockingSample.class.getName() + ".sleepAMoment");
    assertThat(result.getTotalFailureCount()).as("nothing else failed").isEqualTo(1);
  }

  /** Runs the sample class and then {@link SampleAfterIt}, in one test plan. */
  private static TestExecutionSummary run(Class<?> sample, TestExecutionListener... others) {
    BlockingCalls.assertNoneFromTheSdk(); // this class's own calls are not the samples'
    LauncherDiscoveryRequest request =
        LauncherDiscoveryRequestBuilder.request()
            .selectors(selectClass(sample), selectClass(SampleAfterIt.class))
            .build();
    SummaryGeneratingListener summary = new SummaryGeneratingListener();
    TestExecutionListener[] listeners = new TestExecutionListener[others.length + 1];
    listeners[0] = summary;
    System.arraycopy(others, 0, listeners, 1, others.length);
    LauncherFactory.create().execute(request, listeners);
    return summary.getSummary();
  }

  /** The exception of the failed test or class whose name or method is {@code name}. */
  private static Throwable failureOf(TestExecutionSummary result, String name) {
    List<Failure> failures = result.getFailures();
    return failures.stream()
        .filter(
            failure ->
                failure.getTestIdentifier().getDisplayName().startsWith(name)
                    || failure.getTestIdentifier().getLegacyReportingName().startsWith(name)
                    || isClass(failure.getTestIdentifier(), name))
        .map(Failure::getException)
        .findFirst()
        .orElseThrow(() -> new AssertionError("no failure of " + name + " among " + failures));
  }

  private static boolean isClass(TestIdentifier test, Class<?> type) {
    return isClass(test, type.getName());
  }

  private static boolean isClass(TestIdentifier test, String className) {
    return test.getSource().orElse(null) instanceof ClassSource source
        && source.getClassName().equals(className);
  }

  private static void await(CountDownLatch latch) {
    try {
      assertThat(latch.await(30, TimeUnit.SECONDS)).as("the late task ran in 30 s").isTrue();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError(e);
    }
  }
}
