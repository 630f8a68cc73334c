package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;

import dev.idempotency.spring.reactive.BlockingCalls;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.platform.launcher.Launcher;
import org.junit.platform.launcher.LauncherDiscoveryRequest;
import org.junit.platform.launcher.core.LauncherDiscoveryRequestBuilder;
import org.junit.platform.launcher.core.LauncherFactory;
import org.junit.platform.launcher.listeners.SummaryGeneratingListener;
import org.junit.platform.launcher.listeners.TestExecutionSummary;

/**
 * Probe (probeY) of bhinstall (656f19c): does a blocking call of the SDK on a Netty event loop fail
 * a WebFlux test class that does not call {@link BlockingCalls#assertNoneFromTheSdk()} itself?
 * Runs, in this JVM and with the listeners a test JVM has ({@code BlockHoundForEveryTest} among
 * them, from {@code META-INF/services}), a test plan of two classes as surefire would: {@link
 * BlockingSampleWithoutCheck}, whose test serves real HTTP on a Netty event loop and blocks there
 * in a frame of the SDK's package (as a regression in the starter's WebFlux filter would), and
 * checks its response only (as most of the starter's WebFlux test classes do: WebFluxRequestTest,
 * WebFluxStreamingResponseTest, WebFluxConcurrentRefusalTest, WebFluxValidatedStream*Test,
 * WebFluxClientGoneRace*ProbeTest, WebFluxEventLoopConcurrency*ProbeTest,
 * WebFluxSelfWrittenResponseTest, WebFluxInterfaceControllerTest, WebFluxResponseBoundTest,
 * WebFluxStreamInterruptedTest, WebFluxClientGoneStream*Test, WebFluxEndpointAdvisedTest,
 * WebFluxEndpointStartupTest, ...); then {@link SampleAfterIt}, a class that checks nothing either
 * (an MVC or listener class).
 *
 * <p>Open finding (probeY, 7 December 2026), severity other (no send is doubled or lost by it: a
 * door left open in the tests, through which a blocking call on an event loop, which can stall
 * every request on that loop, reaches a release). Expected: the blocking call fails a test of the
 * plan. Seen: both classes pass (0 failures); the call is taken out when the second class starts,
 * logged as a WARN and kept in {@link BlockingCalls#uncheckedFromTheSdk()}, which nothing reads.
 * The check belongs to the classes that call it (14 of the starter's test sources do, directly or
 * through a contract); in any other class, and after a class's last check (its last test, its
 * application's shutdown), a blocking call of the SDK is caught by BlockHound and failed by
 * nothing. The same on Boot 3.5 and Boot 4.0.
 */
@Tag("open-finding")
class BlockHoundUncheckedClassProbeTest {

  @Test
  void aBlockingCallInAClassThatDoesNotCheckFailsATest() {
    BlockingCalls.assertNoneFromTheSdk(); // this class's own start is clean
    int uncheckedBefore = BlockingCalls.uncheckedFromTheSdk().size();
    LauncherDiscoveryRequest request =
        LauncherDiscoveryRequestBuilder.request()
            .selectors(
                selectClass(BlockingSampleWithoutCheck.class), selectClass(SampleAfterIt.class))
            .build();
    Launcher launcher = LauncherFactory.create();
    SummaryGeneratingListener summary = new SummaryGeneratingListener();

    launcher.execute(request, summary);

    TestExecutionSummary result = summary.getSummary();
    assertThat(result.getTestsSucceededCount() + result.getTestsFailedCount())
        .as("both sample tests ran")
        .isEqualTo(2);
    assertThat(BlockingSampleWithoutCheck.blockedOn.get())
        .as("the sample blocked on a Netty event loop")
        .startsWith("reactor-http-");
    List<String> unchecked = BlockingCalls.uncheckedFromTheSdk();
    assertThat(result.getTestsFailedCount())
        .as(
            "a test failed on the sample's blocking call; instead it went unchecked: %s",
            unchecked.subList(uncheckedBefore, unchecked.size()))
        .isPositive();
  }
}
