package dev.idempotency.dynamodb;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.Batch;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.ResultCodec;
import dev.idempotency.testservers.Dynalite;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * probeO (SPEC 1): DynamoDB's conditional extend when the renewal would leave the lease where it
 * is: a guard whose clock steps back 2.5 s (an NTP correction) mid-send asks for leases that end no
 * later than the stored one until real time catches up, so both of {@code extend}'s conditions fail
 * ({@code lease_until <= :lease}) and the item read back must answer renewed (still the owner's, in
 * progress, leased further). Answered lost, the keeper would stop and another guard (on the true
 * clock) would send again once the lease ran out. A single call and a batch of four (the keeper's
 * {@code extendAll}, one conditional update per key), on dynalite; lease 5 s (renewed every 2 s or
 * less, so the first renewals after the step change nothing; A's leases then end 2.5 s ahead of B's
 * clock), guard B asks every 100 ms for two leases. A's store has its own HTTP client: after the
 * step it only renews, so its GetItem requests are the read-backs.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class DynamoDbClockSteppedBackProbeTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofSeconds(5);

  private final InterceptedHttpClient httpA =
      new InterceptedHttpClient(DynaliteClients.http().build());
  private DynamoDbKeyStore store;
  private DynamoDbKeyStore storeA;

  @BeforeAll
  void open() {
    store = DynaliteTables.answeringStore("idempotency-clock-stepped-back");
    storeA =
        DynamoDbKeyStore.builder(DynaliteClients.client(Dynalite.shared().endpoint(), httpA))
            .tableName("idempotency-clock-stepped-back")
            .createTableIfMissing(true)
            .build();
  }

  @AfterAll
  void close() {
    store.close();
    storeA.close();
  }

  @Test
  void aGuardWhoseClockSteppedBackKeepsItsLiveSends() throws Exception {
    String single = "probeO-dynamo-stepped:" + UUID.randomUUID();
    List<String> batchKeys = new ArrayList<>();
    for (int i = 0; i < 4; i++) {
      batchKeys.add("probeO-dynamo-stepped-batch-" + i + ":" + UUID.randomUUID());
    }
    SteppingClock clockA = new SteppingClock();
    AtomicInteger sends = new AtomicInteger();
    AtomicInteger secondSends = new AtomicInteger();
    CountDownLatch firstSending = new CountDownLatch(1);
    CountDownLatch releaseFirst = new CountDownLatch(1);
    try (IdempotencyGuard first =
            IdempotencyGuard.builder().store(storeA).lease(LEASE).clock(clockA).build();
        IdempotencyGuard second =
            IdempotencyGuard.builder()
                .store(store)
                .lease(LEASE)
                .inFlightWait(Duration.ZERO)
                .build()) {
      CompletableFuture<String> sending =
          CompletableFuture.supplyAsync(
              () ->
                  first.execute(
                      single,
                      TTL,
                      ctx -> {
                        sends.incrementAndGet();
                        firstSending.countDown();
                        releaseFirst.await(30, TimeUnit.SECONDS);
                        return "first";
                      }));
      assertThat(firstSending.await(30, TimeUnit.SECONDS)).isTrue();
      List<IdempotencyRequest> requests = new ArrayList<>();
      batchKeys.forEach(key -> requests.add(IdempotencyRequest.of(key, TTL)));
      Batch<String> batch = first.claimBatch(requests, ResultCodec.string());
      List<Batch.Item> handedOut = new ArrayList<>();
      batch.toSend().forEach(handedOut::add);
      assertThat(handedOut).hasSize(4);
      clockA.offsetMillis.set(-2_500);
      httpA.resetCounts(); // from now on A only renews: each GetItem is a renewal's read-back

      List<String> keys = new ArrayList<>(batchKeys);
      keys.add(single);
      long until = System.nanoTime() + LEASE.multipliedBy(2).toNanos();
      List<String> secondGot = new ArrayList<>();
      while (System.nanoTime() - until < 0) {
        for (String key : keys) {
          try {
            secondGot.add(
                key + "=" + second.execute(key, TTL, ctx -> "b-" + secondSends.incrementAndGet()));
          } catch (IdempotencyInProgressException expected) {
            // the first guard still holds it
          }
        }
        Thread.sleep(100);
      }
      Map<String, Long> renewalRequests = httpA.counts();
      releaseFirst.countDown();
      assertThat(sending.get(30, TimeUnit.SECONDS)).isEqualTo("first");
      handedOut.forEach(item -> batch.succeeded(item, "a"));
      assertThat(batch.record().completed()).isEqualTo(4);
      assertThat(secondGot)
          .as("the second guard got none of the keys while they were sent")
          .isEmpty();
      assertThat(secondSends).hasValue(0);
      assertThat(sends).hasValue(1);
      assertThat(renewalRequests.getOrDefault("GetItem", 0L))
          .as("renewals that changed nothing were read back (A's requests: %s)", renewalRequests)
          .isPositive();
    }
  }

  /** The system clock plus an offset a test changes. */
  private static final class SteppingClock extends Clock {
    final AtomicLong offsetMillis = new AtomicLong();

    @Override
    public Instant instant() {
      return Instant.now().plusMillis(offsetMillis.get());
    }

    @Override
    public ZoneId getZone() {
      return ZoneOffset.UTC;
    }

    @Override
    public Clock withZone(ZoneId zone) {
      return this;
    }
  }
}
