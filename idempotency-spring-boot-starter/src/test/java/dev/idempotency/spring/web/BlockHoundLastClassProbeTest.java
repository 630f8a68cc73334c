package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;

import dev.idempotency.spring.reactive.BlockHoundCheckEveryClass;
import dev.idempotency.spring.reactive.BlockingCalls;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
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
 * Probe (probeA, of bhall e56f6744): {@link BlockHoundCheckEveryClass} reports a blocking call of
 * the SDK made after a class's last check (a late callback on a thread the class left running) at
 * the start of the next top-level class. The last class of a test plan has no next class: surefire
 * runs each fork's classes as one test plan, so such a call after the last class of a fork is
 * reported by nothing. Here {@link LateBlockingSample} runs alone in a test plan, as the last class
 * of a fork would, and its late task blocks on a Reactor {@code parallel} worker in a frame of the
 * SDK's package once the class ended.
 */
class BlockHoundLastClassProbeTest {

  /*
   * Open finding (probeA, on ad1148aa). Expected: the test plan fails on the late blocking call (as
   * it does when a class follows, BlockHoundUncheckedClassProbeTest). Happened: the plan's summary
   * has no failure; the call was remembered (BlockingCalls.fromTheSdk) and reported by nothing in
   * that plan; in a surefire fork it would be lost when the JVM exits. Severity: other (a blocking
   * call of the SDK on a non-blocking thread, made late by the last class of a fork, goes unseen;
   * no send is affected).
   */
  @Tag("open-finding")
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
