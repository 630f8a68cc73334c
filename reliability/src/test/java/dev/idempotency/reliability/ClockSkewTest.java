package dev.idempotency.reliability;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.Batch;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.ResultCodec;
import dev.idempotency.spi.KeyStore;
import java.io.IOException;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
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
 * database time, neither can take over the other's live claim or end its window early. On the
 * guard's clock (the JDBC store's client time) a host ahead can, which is the clock skew the docs
 * name and the fault run's checker excuses ("taker's clock ahead").
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

  /**
   * The seed-17 fault run on {@code postgresql_client_time} (fault-key-124), in one JVM: a batch
   * holds a key it has not sent yet; a host whose clock runs ahead sees that lease over and takes
   * the key (attempt 2), its send fails and it releases the key; a third host claims the key afresh
   * (attempt 1). The batch owner learns that it lost the key only from its next renewal (off here,
   * so that no background renewal decides the outcome), so it sends too: two first attempts, the
   * owner's outcome refused by the fence. On client time that is the clock skew the docs allow; on
   * database time the host ahead sees the live lease, and the key is sent once.
   */
  @ParameterizedTest(name = "{0}")
  @MethodSource("postgresqlTimes")
  void aTakeoverByAHostAheadThatReleasesTheKeyLetsAThirdClaimItAfresh(
      String name, String spec, boolean skewTakesOver) throws Exception {
    KeyStore store = Stores.open(spec, 4);
    Duration lease = Duration.ofSeconds(30);
    List<IdempotencyRequest> key =
        List.of(IdempotencyRequest.of("skew:" + UUID.randomUUID(), Duration.ofHours(1)));
    try (IdempotencyGuard owner =
            IdempotencyGuard.builder().store(store).lease(lease).leaseRenewal(false).build();
        IdempotencyGuard ahead =
            IdempotencyGuard.builder()
                .store(store)
                .lease(lease)
                .clock(Clock.offset(Clock.systemUTC(), lease.multipliedBy(4)))
                .build();
        IdempotencyGuard third = IdempotencyGuard.builder().store(store).lease(lease).build()) {
      Batch<String> owners = owner.claimBatch(key, ResultCodec.string());
      assertThat(owners.claimedKeys()).hasSize(1);

      Batch<String> aheads = ahead.claimBatch(key, ResultCodec.string());
      assertThat(aheads.claimedKeys()).hasSize(skewTakesOver ? 1 : 0);
      for (Batch.Item item : aheads.toSend()) {
        assertThat(item.context().attempt()).as("the host ahead took the key over").isEqualTo(2);
        aheads.failed(item, new IOException("provider timed out"));
      }
      assertThat(aheads.record().released()).isEqualTo(skewTakesOver ? 1 : 0);

      Batch<String> thirds = third.claimBatch(key, ResultCodec.string());
      List<Integer> attempts = new ArrayList<>();
      int[] notRecorded = new int[1];
      for (Batch<String> batch : List.of(owners, thirds)) {
        for (Batch.Item item : batch.toSend()) {
          attempts.add(item.context().attempt());
          batch.succeeded(item, "sent");
        }
        notRecorded[0] += batch.record().notRecorded().size();
      }

      if (skewTakesOver) {
        assertThat(attempts).as("the owner and the fresh claim both send").containsExactly(1, 1);
        assertThat(notRecorded[0]).as("the owner's outcome, fenced, is refused").isEqualTo(1);
      } else {
        assertThat(attempts).as("only the owner sends").containsExactly(1);
        assertThat(thirds.inFlight()).hasSize(1);
        assertThat(notRecorded[0]).isZero();
      }
    }
  }

  Stream<Arguments> postgresqlTimes() {
    return Stream.of(
        Arguments.of("postgresql, client time", FaultRunChild.CLIENT_TIME + postgres.url(), true),
        Arguments.of("postgresql, database time", postgres.url(), false));
  }
}
