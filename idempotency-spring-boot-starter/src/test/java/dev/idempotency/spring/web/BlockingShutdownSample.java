package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * A sample test class for {@link BlockHoundUncheckedClassProbeTest} (not run by surefire: its name
 * does not end in Test): its test passes, and its shutdown after the last test ({@code @AfterAll},
 * as an application closed there) blocks on a Reactor {@code parallel} worker in a frame of the
 * SDK's package.
 */
class BlockingShutdownSample {

  @Test
  void passes() {
    assertThat(1 + 1).isEqualTo(2);
  }

  @AfterAll
  static void shutDown() {
    Mono.fromCallable(BlockingShutdownSample::sleepAMoment)
        .subscribeOn(Schedulers.parallel())
        .block(Duration.ofSeconds(30));
  }

  private static String sleepAMoment() throws InterruptedException {
    Thread.sleep(1);
    return "slept";
  }
}
