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
import reactor.blockhound.BlockingOperationError;

/**
 * A blocking call of the SDK on a non-blocking thread made after the last class of a test plan was
 * checked fails the plan ({@link BlockHoundCheckEveryClass}: its check when JUnit Jupiter's run of
 * the plan ends, reported as a failure of the "JUnit Jupiter" engine). Surefire runs each fork's
 * classes as one test plan (or, handing classes to several forks, each class as a plan of its own),
 * so the last class of a fork has no next class whose start would report the call. Here {@link
 * LateBlockingSample} runs alone in a test plan, as the last class of a fork would, and its late
 * task blocks on a Reactor {@code parallel} worker in a frame of the SDK's package once the class
 * ended.
 *
 * <p>Found by probeA (of bhall e56f6744, open finding on ad1148aa): the plan's summary had no
 * failure; the call was remembered ({@link BlockingCalls#fromTheSdk()}) and reported by nothing,
 * and in a surefire fork it was lost when the JVM exited. The same on Boot 3.5 and Boot 4.0.
 */
class BlockHoundLastClassProbeTest {

  @Test
  void aBlockingCallAfterTheLastClassOfAPlanFailsThePlan() {
    BlockingCalls.assertNoneFromTheSdk(); // this class's own calls are not the sample's
    LateBlockingSample.release = new CountDownLatch(1);
    LateBlockingSample.blocked = new CountDownLatch(1);
    TestExecutionListener releaseWhenTheSampleEnded =
        new TestExecutionListener() {
          @Override
          public void executionFinished(TestIdentifier test, TestExecutionResult result) {
            if (test.getSource().orElse(null) instanceof ClassSource source
                && source.getClassName().equals(LateBlockingSample.class.getName())) {
              LateBlockingSample.release.countDown();
              await(LateBlockingSample.blocked);
            }
          }
        };
    LauncherDiscoveryRequest request =
        LauncherDiscoveryRequestBuilder.request()
            .selectors(selectClass(LateBlockingSample.class))
            .build();
    SummaryGeneratingListener summary = new SummaryGeneratingListener();
    LauncherFactory.create().execute(request, summary, releaseWhenTheSampleEnded);
    TestExecutionSummary result = summary.getSummary();
    List<BlockingOperationError> unreported = BlockingCalls.takeFromTheSdk();

    assertThat(LateBlockingSample.blockedOn.get())
        .as("the sample's late task blocked on a parallel worker")
        .startsWith("parallel-");
    assertThat(result.getTestsSucceededCount()).as("the sample's test passed").isEqualTo(1);
    assertThat(result.getTotalFailureCount())
        .as(
            "the plan failed on the late call; calls of the SDK left unreported when it ended: "
                + unreported.size())
        .isEqualTo(1);
    assertThat(result.getFailures().get(0).getTestIdentifier().getParentId())
        .as("the failure is the JUnit Jupiter engine's (the plan's root), at the plan's end")
        .isEmpty();
    assertThat(result.getFailures().get(0).getException())
        .as("the failure names the late call and the class it came after")
        .hasMessageContaining("after the last check of " + LateBlockingSample.class.getName())
        .hasMessageContaining("Thread.sleep")
        .hasMessageContaining(LateBlockingSample.class.getName() + ".sleepAMoment");
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
