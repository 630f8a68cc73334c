package dev.idempotency.reliability;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.spi.KeyStore;
import java.time.Clock;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Two guards whose application clocks differ by ten minutes share a store: with Redis time and with
 * database time, neither can take over the other's live claim or end its window early.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ClockSkewTest {

  RestartablePostgres postgres;
  RestartableRedis redis;

  @BeforeAll
  void start() throws Exception {
    postgres = new RestartablePostgres();
    redis = new RestartableRedis(false);
  }

  @AfterAll
  void stop() throws Exception {
    postgres.close();
    redis.close();
  }

  Stream<Arguments> stores() {
    return Stream.of(
        Arguments.of("postgresql, database time", postgres.url()),
        Arguments.of("redis", redis.uri()));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("stores")
  void tenMinutesOfSkewBreaksNeitherLeasesNorWindows(String name, String spec) throws Exception {
    KeyStore store = Stores.open(spec, 4);
    Duration ttl = Duration.ofMinutes(5);
    IdempotencyGuard behind =
        IdempotencyGuard.builder()
            .store(store)
            .clock(Clock.offset(Clock.systemUTC(), Duration.ofMinutes(-5)))
            .build();
    IdempotencyGuard ahead =
        IdempotencyGuard.builder()
            .store(store)
            .clock(Clock.offset(Clock.systemUTC(), Duration.ofMinutes(5)))
            .inFlightWait(Duration.ZERO)
            .build();
    String key = "skew:" + UUID.randomUUID();
    CountDownLatch sending = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);

    CompletableFuture<String> first =
        CompletableFuture.supplyAsync(
            () ->
                behind.execute(
                    key,
                    ttl,
                    ctx -> {
                      sending.countDown();
                      release.await();
                      return "n_1";
                    }));
    assertThat(sending.await(60, TimeUnit.SECONDS)).isTrue();
    assertThatThrownBy(() -> ahead.execute(key, ttl, ctx -> "duplicate"))
        .as("the host ten minutes ahead sees a live lease")
        .isInstanceOf(IdempotencyInProgressException.class);
    release.countDown();
    assertThat(first.get(60, TimeUnit.SECONDS)).isEqualTo("n_1");

    String replay = ahead.execute(key, ttl, ctx -> "duplicate");
    assertThat(replay).as("the host ten minutes ahead sees the window open").isEqualTo("n_1");
  }
}
