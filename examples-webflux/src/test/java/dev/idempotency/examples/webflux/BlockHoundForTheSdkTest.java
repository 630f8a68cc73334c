package dev.idempotency.examples.webflux;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;

import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.platform.launcher.core.LauncherDiscoveryRequestBuilder;
import org.junit.platform.launcher.core.LauncherFactory;
import org.junit.platform.launcher.listeners.SummaryGeneratingListener;
import org.junit.platform.launcher.listeners.TestExecutionSummary;
import org.junit.platform.launcher.listeners.TestExecutionSummary.Failure;

/**
 * The example's tests run with BlockHound ({@link BlockHoundForTheSdk}): a blocking call from the
 * SDK's code on an event loop fails the test it was made in, although the test checks only its
 * response. Runs {@link BlockingListenerSample} in a test plan of its own in this JVM, with what a
 * test JVM registers ({@code META-INF/services}, {@code junit-platform.properties}), as surefire
 * would: its application's {@link dev.idempotency.IdempotencyListener} blocks, called by the SDK on
 * a non-blocking thread.
 */
class BlockHoundForTheSdkTest {

  @Test
  void aBlockingCallFromTheSdkOnAnEventLoopFailsTheTestThatMadeIt() {
    assertThat(BlockHoundForTheSdk.takeFromTheSdk()).as("no call before the sample's").isEmpty();
    BlockingListenerSample.blockedOn.clear();
    SummaryGeneratingListener summary = new SummaryGeneratingListener();

    LauncherFactory.create()
        .execute(
            LauncherDiscoveryRequestBuilder.request()
                .selectors(selectClass(BlockingListenerSample.class))
                .build(),
            summary);

    TestExecutionSummary result = summary.getSummary();
    List<Failure> failures = result.getFailures();
    assertThat(BlockingListenerSample.blockedOn).as("the listener ran").isNotEmpty();
    assertThat(result.getTestsFailedCount())
        .as("the sample's test failed, on threads " + BlockingListenerSample.blockedOn)
        .isEqualTo(1);
    assertThat(failures.get(0).getException())
        .as("the failure names the blocking call and the SDK's frames under it")
        .hasMessageContaining(
            "blocking call(s) of the SDK on a non-blocking thread in servesARequest")
        .hasMessageContaining("Thread.sleep")
        .hasMessageContaining(BlockingListenerSample.BlockingListener.class.getName() + ".onEvent")
        .hasMessageFindingMatch("at dev\\.idempotency\\.(?!examples\\.)");
    assertThat(result.getTotalFailureCount()).as("nothing else failed: " + failures).isEqualTo(1);
  }
}
