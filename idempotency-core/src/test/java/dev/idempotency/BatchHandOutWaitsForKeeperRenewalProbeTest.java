package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.ForwardingKeyStore;
import dev.idempotency.tck.MutableClock;
import java.time.Duration;
import java.time.Instant;
import java.util.Iterator;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * probeO (SPEC 1), after f751285: the keeper's own renewal of a batch's keys is on its way (slow)
 * when the batch's next hand-out needs them renewed ({@code renewNow} for the key not handed out,
 * {@code renewStartedNow} for the key being sent): the hand-out waits for it, and when the keeper's
 * renewal fails (the keeper never loses a claim on a failure), renews both itself. The key being
 * sent stays renewed and another guard finds it in progress past its first lease; the second key is
 * handed out.
 *
 * <p>In-memory store behind one whose first renewal on a keeper thread waits for the test and then
 * fails; lease 4 s, guard clock moved by hand (the keeper's first round comes a second after the
 * claim, in real time).
 */
class BatchHandOutWaitsForKeeperRenewalProbeTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofSeconds(4);

  final MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final AtomicBoolean armed = new AtomicBoolean(true);
  final CountDownLatch keeperRenewing = new CountDownLatch(1);
  final CountDownLatch failKeeper = new CountDownLatch(1);
  final AtomicInteger renewalsAfterKeeper = new AtomicInteger();
  final InMemoryKeyStore memory = InMemoryKeyStore.builder().build();
  final KeyStore slowKeeper =
      new ForwardingKeyStore(memory) {
        @Override
        public List<Boolean> extendAll(List<ExtendRequest> requests) {
          if (Thread.currentThread().getName().contains("lease-keeper")
              && armed.compareAndSet(true, false)) {
            keeperRenewing.countDown();
            try {
              failKeeper.await(30, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
            }
            throw new KeyStoreException("the store did not answer in time", null);
          }
          if (!armed.get()) {
            renewalsAfterKeeper.incrementAndGet();
          }
          return delegate.extendAll(requests);
        }
      };
  final IdempotencyGuard guardA = guard(slowKeeper);
  final IdempotencyGuard guardB = guard(memory);

  IdempotencyGuard guard(KeyStore store) {
    return IdempotencyGuard.builder()
        .store(store)
        .clock(clock)
        .lease(LEASE)
        .inFlightWait(Duration.ZERO)
        .build();
  }

  @AfterEach
  void close() {
    failKeeper.countDown();
    guardA.close();
    guardB.close();
  }

  @Test
  void aHandOutWaitsForTheKeepersFailedRenewalAndRenewsItself() throws Exception {
    String k1 = "batch-waits-keeper-1:" + UUID.randomUUID();
    String k2 = "batch-waits-keeper-2:" + UUID.randomUUID();
    AtomicInteger k1Sends = new AtomicInteger();
    String b;
    try (Batch<String> batch =
        guardA.claimBatch(
            List.of(IdempotencyRequest.of(k1, TTL), IdempotencyRequest.of(k2, TTL)),
            ResultCodec.string())) {
      Iterator<Batch.Item> toSend = batch.toSend().iterator();
      Batch.Item first = toSend.next();
      assertThat(first.key()).isEqualTo(k1);
      k1Sends.incrementAndGet(); // k1's provider call starts, on another thread
      assertThat(keeperRenewing.await(30, TimeUnit.SECONDS))
          .as("the keeper's renewal is on its way")
          .isTrue();

      clock.advance(Duration.ofMillis(3500));
      CompletableFuture<Batch.Item> next =
          CompletableFuture.supplyAsync(() -> toSend.hasNext() ? toSend.next() : null);
      // the hand-out waits for the keeper's renewal of both keys (bounded check that it does)
      Thread.sleep(200);
      boolean waited = !next.isDone();
      failKeeper.countDown();
      Batch.Item second = next.get(30, TimeUnit.SECONDS);

      clock.advance(Duration.ofMillis(1500)); // T0+5 s: k1's send still runs
      try {
        b = guardB.execute(k1, TTL, ctx -> "b-" + k1Sends.incrementAndGet());
      } catch (IdempotencyInProgressException expected) {
        b = "in progress";
      }
      assertThat(waited).as("the hand-out waited for the keeper's renewal").isTrue();
      assertThat(second).as("k2 handed out after its own renewal").isNotNull();
      assertThat(second.key()).isEqualTo(k2);
      assertThat(renewalsAfterKeeper)
          .as("the hand-out renewed after the keeper")
          .hasPositiveValue();
      batch.succeeded(first, "a-1");
      batch.succeeded(second, "a-2");
      assertThat(batch.record().completed()).isEqualTo(2);
    }
    assertThat(k1Sends).as("k1 sent once (B got: %s)", b).hasValue(1);
  }
}
