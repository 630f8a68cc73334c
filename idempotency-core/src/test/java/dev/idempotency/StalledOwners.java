package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/** A first owner whose send runs until the test lets it end: its lease can lapse under it. */
final class StalledOwners {

  private StalledOwners() {}

  /**
   * Calls {@code owner.execute(key, ttl, ...)} on another thread, whose send counts itself in
   * {@code sends} and then waits for {@code mayFinish} (bounded, 30 s); returns once that send has
   * begun.
   *
   * @return the owner's call, answering "owner" once {@code mayFinish} is counted down
   */
  static CompletableFuture<String> sending(
      IdempotencyGuard owner,
      String key,
      Duration ttl,
      AtomicInteger sends,
      CountDownLatch mayFinish)
      throws InterruptedException {
    CountDownLatch sending = new CountDownLatch(1);
    CompletableFuture<String> call =
        CompletableFuture.supplyAsync(
            () ->
                owner.execute(
                    key,
                    ttl,
                    ctx -> {
                      sends.incrementAndGet();
                      sending.countDown();
                      assertThat(mayFinish.await(30, TimeUnit.SECONDS)).isTrue();
                      return "owner";
                    }));
    assertThat(sending.await(30, TimeUnit.SECONDS)).as("the owner's send began").isTrue();
    return call;
  }
}
