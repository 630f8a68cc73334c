package dev.idempotency.dynamodb;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.Batch;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.KeyStoreException;
import dev.idempotency.ResultCodec;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.ForwardingKeyStore;
import dev.idempotency.tck.MutableClock;
import dev.idempotency.testservers.Dynalite;
import dev.idempotency.testservers.Poll;
import java.time.Duration;
import java.time.Instant;
import java.util.Iterator;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.assertj.core.api.SoftAssertions;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * probeT (SPEC 1): {@code dev.idempotency.BatchConcurrentHandOutFailedRenewalProbeTest} (probeO's,
 * fixed by 123d5c2) on DynamoDB (dynalite; the store on the guard's clock): thread 1's hand-out
 * renewal of keys a and y, which counted a as not handed out, is held and then fails (the store did
 * not answer); meanwhile thread 2, after a 1 s clock step back, hands a out. The failure must not
 * mark a lost: the keeper goes on renewing it while its send runs, and guard B, asking after a's
 * first lease would have run out, finds it in progress. Lease 8 s, the guard's clock moved by hand.
 */
class DynamoDbBatchConcurrentHandOutFailedRenewalProbeTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofSeconds(8);
  static final String FAILING_THREAD = "probeT-dynamodb-batch-hand-out-1";

  final MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final AtomicBoolean armed = new AtomicBoolean(true);
  final CountDownLatch renewalSent = new CountDownLatch(1);
  final CountDownLatch failRenewal = new CountDownLatch(1);
  final DynamoDbKeyStore store =
      DynamoDbKeyStore.builder(DynaliteClients.client(Dynalite.shared().endpoint()))
          .tableName("idempotency-probet-concurrent")
          .createTableIfMissing(true)
          .build();

  {
    try {
      Poll.within(Duration.ofSeconds(60))
          .every(Duration.ofMillis(50))
          .ignoring(KeyStoreException.class)
          .until("the table answers", () -> store.find("warm", Instant.now()), found -> true);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  final KeyStore failingOnThread1 =
      new ForwardingKeyStore(store) {
        @Override
        public List<Boolean> extendAll(List<ExtendRequest> requests) {
          if (Thread.currentThread().getName().equals(FAILING_THREAD)
              && armed.compareAndSet(true, false)) {
            renewalSent.countDown();
            try {
              failRenewal.await(30, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
            }
            throw new KeyStoreException("the store did not answer in time", null);
          }
          return delegate.extendAll(requests);
        }
      };
  final IdempotencyGuard guardA = guard(failingOnThread1);
  final IdempotencyGuard guardB = guard(store);

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
    failRenewal.countDown();
    guardA.close();
    guardB.close();
    store.close();
  }

  // probeT: fails with 123d5c2's LeaseKeeper change taken out (a failed renewal losing every claim
  // of its chunk): "[a sent once (B got: b-2)] Expecting AtomicInteger(2) to have value: 1"; passes
  // with it.
  @Test
  void aKeyHandedOutWhileAnotherThreadsRenewalFailsIsStillRenewed() throws Exception {
    String a = "dynamodb-batch-concurrent-a:" + UUID.randomUUID();
    String y = "dynamodb-batch-concurrent-y:" + UUID.randomUUID();
    AtomicInteger aSends = new AtomicInteger();
    SoftAssertions softly = new SoftAssertions();
    String b;
    try (Batch<String> batch =
        guardA.claimBatch(
            List.of(IdempotencyRequest.of(a, TTL), IdempotencyRequest.of(y, TTL)),
            ResultCodec.string())) {
      // thread 1, at T0+6.5 s: its check of a looks beyond both leases (T0+8 s) and renews both
      clock.advance(Duration.ofMillis(6500));
      AtomicReference<Boolean> thread1Found = new AtomicReference<>();
      Thread thread1 =
          new Thread(() -> thread1Found.set(batch.toSend().iterator().hasNext()), FAILING_THREAD);
      thread1.start();
      assertThat(renewalSent.await(30, TimeUnit.SECONDS))
          .as("thread 1 renews before its hand-out")
          .isTrue();

      // thread 2 (this one), after a 1 s step back: a is still live, and is handed out
      clock.advance(Duration.ofMillis(-1000));
      Iterator<Batch.Item> toSend = batch.toSend().iterator();
      assertThat(toSend.hasNext()).isTrue();
      Batch.Item first = toSend.next();
      assertThat(first.key()).isEqualTo(a);
      aSends.incrementAndGet(); // a's provider call starts

      failRenewal.countDown(); // thread 1's renewal of a and y fails
      thread1.join(30_000);
      assertThat(thread1.isAlive()).isFalse();

      // real time passes while a's send runs: the keeper renews a (due 2 s after its claim, rounds
      // every second) unless it was dropped; bounded wait
      clock.advance(Duration.ofMillis(500)); // T0+6 s
      Instant leaseBefore = guardB.find(a).orElseThrow().leaseExpiresAt();
      long until = System.nanoTime() + Duration.ofSeconds(5).toNanos();
      while (System.nanoTime() - until < 0
          && !guardB.find(a).orElseThrow().leaseExpiresAt().isAfter(leaseBefore)) {
        Thread.sleep(20);
      }
      clock.advance(Duration.ofMillis(3000)); // T0+9 s: a's send still runs
      try {
        b = guardB.execute(a, TTL, ctx -> "b-" + aSends.incrementAndGet());
      } catch (IdempotencyInProgressException expected) {
        b = "in progress";
      }
      softly
          .assertThat(batch.lapsed())
          .as("a key handed out is not lapsed (lapsed keys 'were not sent')")
          .doesNotContain(a);
      batch.succeeded(first, "a-1");
      batch.record();
    }
    softly.assertThat(aSends).as("a sent once (B got: %s)", b).hasValue(1);
    softly.assertAll();
  }
}
