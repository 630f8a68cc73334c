package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.spring.reactive.BlockingCalls;
import java.time.Duration;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import reactor.blockhound.BlockingOperationError;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;
import reactor.netty.DisposableServer;
import reactor.netty.http.client.HttpClient;
import reactor.netty.http.server.HttpServer;

/**
 * Probe (probeY) of bhinstall (656f19c): a blocking call from a frame of the SDK's packages on a
 * Netty event loop serving real HTTP, and on a Reactor {@code parallel} worker, is caught by
 * BlockHound as a {@link BlockingOperationError} and fails the class's check ({@link
 * BlockingCalls#assertNoneFromTheSdk()}), with nothing in this class installing BlockHound: {@code
 * BlockHoundForEveryTest} must have done so when the test JVM started its tests, in whatever order
 * the fork runs its classes. Runs on Boot 3.5 (the starter) and Boot 4.0 ({@code
 * spring-boot-4-tests}). This class is in the SDK's package {@code dev.idempotency.spring.web}, so
 * its frames count as the SDK's.
 */
class BlockHoundNettyEventLoopProbeTest {

  private static final Duration BOUND = Duration.ofSeconds(30);

  private static final AtomicReference<String> blockedOn = new AtomicReference<>();

  @Test
  void aBlockingCallOnANettyEventLoopServingHttpIsCaught() {
    DisposableServer server =
        HttpServer.create()
            .host("127.0.0.1")
            .port(0)
            .handle(
                (request, response) ->
                    response.sendString(
                        Mono.fromCallable(BlockHoundNettyEventLoopProbeTest::sleepAMoment)))
            .bindNow(BOUND);
    try {
      String body =
          HttpClient.create()
              .get()
              .uri("http://127.0.0.1:" + server.port() + "/")
              .responseContent()
              .aggregate()
              .asString()
              .block(BOUND);

      assertThat(body).isEqualTo("slept");
      assertThat(blockedOn.get())
          .as("the handler ran on a Netty event loop")
          .startsWith("reactor-http-");
      assertCaughtAndFailed();
    } finally {
      server.disposeNow(BOUND);
    }
  }

  @Test
  void aBlockingCallOnAParallelWorkerIsCaught() {
    String result =
        Mono.fromCallable(BlockHoundNettyEventLoopProbeTest::sleepAMoment)
            .subscribeOn(Schedulers.parallel())
            .block(BOUND);

    assertThat(result).isEqualTo("slept");
    assertThat(blockedOn.get()).startsWith("parallel-");
    assertCaughtAndFailed();
  }

  private static void assertCaughtAndFailed() {
    assertThat(BlockingCalls.fromTheSdk())
        .as("BlockHound caught the sleep (installed before this class by BlockHoundForEveryTest)")
        .anySatisfy(
            call -> {
              assertThat(call).isInstanceOf(BlockingOperationError.class);
              assertThat(call.getMessage()).contains("java.lang.Thread.sleep");
              assertThat(Arrays.stream(call.getStackTrace()))
                  .anyMatch(
                      frame ->
                          frame
                                  .getClassName()
                                  .equals(BlockHoundNettyEventLoopProbeTest.class.getName())
                              && frame.getMethodName().equals("sleepAMoment"));
            });
    assertThatThrownBy(BlockingCalls::assertNoneFromTheSdk)
        .as("the class's check fails on it")
        .isInstanceOf(AssertionError.class)
        .hasMessageContaining("Thread.sleep")
        .hasMessageContaining(BlockHoundNettyEventLoopProbeTest.class.getName() + ".sleepAMoment");
    assertThat(BlockingCalls.fromTheSdk()).as("a check forgets what it reported").isEmpty();
  }

  private static String sleepAMoment() throws InterruptedException {
    blockedOn.set(Thread.currentThread().getName());
    Thread.sleep(1);
    return "slept";
  }
}
