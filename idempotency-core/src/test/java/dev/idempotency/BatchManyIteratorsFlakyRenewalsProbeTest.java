package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spi.RecordState;
import dev.idempotency.tck.ForwardingKeyStore;
import dev.idempotency.tck.MutableClock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Random;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * probeT (SPEC 1): four threads iterate one batch's {@code toSend()} at once while the store fails
 * (does not answer) about a third of the renewals, seeded, some after a short delay; the sending
 * threads move the guard's clock forward as they go, so that most hand-outs renew the batch's keys
 * on their own thread ({@code BatchLeases.renewBefore}) and the keeper's rounds come too late to
 * matter. 2,000 rounds of eight keys. The rule checked on every hand-out and report:
 *
 * <ul>
 *   <li>no key is handed out twice, and every key handed out had, in the store, a lease reaching
 *       more than the keeper's margin past the guard's time read before {@code next()} (a key whose
 *       lease could not be renewed is never sent);
 *   <li>a key handed out is never lapsed, and its claim never marked lost unless the store refused
 *       a renewal of it (here only a late one, once its outcome was written: nobody else claims the
 *       keys), whatever the failed renewals of other threads;
 *   <li>after {@code record()}: a key reported sent is COMPLETED with its result (a repeat by guard
 *       B replays it); every other key (lapsed, lost before its hand-out, reported failed) was
 *       released or taken back, so that B sends it (nothing left in progress).
 * </ul>
 *
 * In-memory store; lease 4 s; the guard's clock moved by the sending threads. Passes on probeT
 * c8a7ab8 (5 to 8 s: about 13,700 keys handed out, 2,200 lapsed, 560 renewals failed); with {@code
 * LeaseKeeper.renewNow} put back to losing every claim of a failed renewal (before 123d5c2) it
 * failed in 2 of 2 runs ("sent, its claim marked lost", at rounds 415 and 302). Tagged extended for
 * its length.
 */
class BatchManyIteratorsFlakyRenewalsProbeTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofSeconds(4);
  static final Duration MARGIN = LEASE.dividedBy(4);
  static final Duration MAX_STEP_BACK = Duration.ofMillis(1000);
  static final int ROUNDS = 2000;
  static final int KEYS = 8;
  static final int THREADS = 4;

  final MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final Random faults = new Random(20261206L);
  final AtomicInteger failedRenewals = new AtomicInteger();
  final AtomicInteger answeredRenewals = new AtomicInteger();
  final Set<String> refused = ConcurrentHashMap.newKeySet();
  final InMemoryKeyStore memory = InMemoryKeyStore.builder().build();
  final KeyStore flaky =
      new ForwardingKeyStore(memory) {
        @Override
        public boolean extend(ExtendRequest request) {
          failSometimes();
          boolean extended = delegate.extend(request);
          if (!extended) {
            refused.add(request.keyId());
          }
          return extended;
        }

        @Override
        public List<Boolean> extendAll(List<ExtendRequest> requests) {
          failSometimes();
          List<Boolean> extended = delegate.extendAll(requests);
          for (int i = 0; i < requests.size(); i++) {
            if (!extended.get(i)) {
              refused.add(requests.get(i).keyId()); // a late renewal of an outcome written
            }
          }
          return extended;
        }

        private void failSometimes() {
          int draw;
          synchronized (faults) {
            draw = faults.nextInt(100);
          }
          if (draw < 40) {
            try {
              Thread.sleep(1 + draw % 3); // a slow answer, to widen the windows between threads
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
            }
          }
          if (draw < 33) {
            failedRenewals.incrementAndGet();
            throw new KeyStoreException("the store did not answer in time", null);
          }
          answeredRenewals.incrementAndGet();
        }
      };
  final IdempotencyGuard guardA = guard(flaky);
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
    guardA.close();
    guardB.close();
  }

  @Tag("extended")
  @Test
  void keysHandedOutByManyThreadsAreNeverLostOrLapsedAndUnrenewableKeysAreNeverSent()
      throws Exception {
    List<String> violations = new CopyOnWriteArrayList<>();
    int handedOutTotal = 0;
    int lapsedTotal = 0;
    for (int round = 0; round < ROUNDS && violations.isEmpty(); round++) {
      String id = UUID.randomUUID().toString();
      List<IdempotencyRequest> requests = new ArrayList<>();
      for (int k = 0; k < KEYS; k++) {
        requests.add(IdempotencyRequest.of("flaky-batch:" + round + ":" + k + ":" + id, TTL));
      }
      Map<String, Batch.Item> handedOut = new ConcurrentHashMap<>();
      Set<String> succeeded = ConcurrentHashMap.newKeySet();
      Batch<String> batch = guardA.claimBatch(requests, ResultCodec.string());
      clock.advance(Duration.ofMillis(new Random(round).nextInt(2500))); // the batch waited
      CountDownLatch start = new CountDownLatch(1);
      List<Thread> threads = new ArrayList<>();
      for (int t = 0; t < THREADS; t++) {
        Random random = new Random(round * 31L + t);
        Thread thread =
            new Thread(
                () -> {
                  try {
                    start.await();
                    iterate(batch, random, handedOut, succeeded, violations);
                  } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                  } catch (RuntimeException | AssertionError e) {
                    violations.add("thread failed: " + e);
                  }
                },
                "probeT-sender-" + t);
        threads.add(thread);
        thread.start();
      }
      start.countDown();
      for (Thread thread : threads) {
        thread.join(60_000);
        assertThat(thread.isAlive()).as("sender thread ended").isFalse();
      }
      List<String> lapsed = List.copyOf(batch.lapsed());
      Batch.Recorded recorded = batch.record();
      handedOutTotal += handedOut.size();
      lapsedTotal += lapsed.size();
      for (Map.Entry<String, Batch.Item> sent : handedOut.entrySet()) {
        if (lapsed.contains(sent.getKey())) {
          violations.add("round " + round + ": handed out and lapsed: " + sent.getKey());
        }
        Batch.Item item = sent.getValue();
        if (succeeded.contains(sent.getKey())
            && item.claim.isLost()
            && !refused.contains(item.call.keyId)) {
          violations.add("round " + round + ": sent, its claim marked lost: " + sent.getKey());
        }
      }
      for (IdempotencyRequest request : requests) {
        String key = request.key();
        if (succeeded.contains(key) && !recorded.notRecorded().contains(key)) {
          IdempotencyRecord stored = guardB.find(key).orElse(null);
          if (stored == null || stored.state() != RecordState.COMPLETED) {
            violations.add("round " + round + ": sent, not COMPLETED: " + key + " " + stored);
          }
        }
        String b;
        try {
          b = guardB.execute(key, TTL, ctx -> "b");
        } catch (IdempotencyInProgressException e) {
          b = "in progress";
        }
        String expected = succeeded.contains(key) ? "a-" + key : "b";
        if (!expected.equals(b) && !recorded.notRecorded().contains(key)) {
          violations.add(
              "round "
                  + round
                  + ": B got "
                  + b
                  + " for "
                  + key
                  + " (handed out "
                  + handedOut.containsKey(key)
                  + ", lapsed "
                  + lapsed.contains(key)
                  + ")");
        }
      }
    }
    System.out.printf(
        "probeT flaky batch renewals: %d failed, %d answered; %d keys handed out, %d lapsed%n",
        failedRenewals.get(), answeredRenewals.get(), handedOutTotal, lapsedTotal);
    assertThat(violations).isEmpty();
    assertThat(failedRenewals.get())
        .as(
            "renewals failed (%d answered; %d handed out, %d lapsed)",
            answeredRenewals.get(), handedOutTotal, lapsedTotal)
        .isGreaterThan(100);
    assertThat(lapsedTotal).as("keys lapsed").isPositive();
    assertThat(handedOutTotal).as("keys handed out").isGreaterThan(ROUNDS);
  }

  private void iterate(
      Batch<String> batch,
      Random random,
      Map<String, Batch.Item> handedOut,
      Set<String> succeeded,
      List<String> violations) {
    Iterator<Batch.Item> toSend = batch.toSend().iterator();
    while (true) {
      Instant before = clock.instant();
      Batch.Item item;
      try {
        if (!toSend.hasNext()) {
          return;
        }
        if (random.nextBoolean()) {
          Thread.yield(); // between hasNext() and next(), as a loop waiting for a quota
        }
        item = toSend.next();
      } catch (NoSuchElementException e) {
        return; // what hasNext() reserved was handed out or lapsed elsewhere since
      }
      String key = item.key();
      if (handedOut.putIfAbsent(key, item) != null) {
        violations.add("handed out twice: " + key);
      }
      IdempotencyRecord stored = guardB.find(key).orElse(null);
      if (stored == null
          || stored.state() != RecordState.IN_PROGRESS
          || !stored.leaseExpiresAt().isAfter(before.minus(MAX_STEP_BACK).plus(MARGIN))) {
        violations.add(
            "handed out with a lease ending before "
                + before.minus(MAX_STEP_BACK).plus(MARGIN)
                + ": "
                + key
                + " "
                + stored);
      }
      // the send: the guard's clock moves on meanwhile, as other threads' sends do
      if (random.nextBoolean()) {
        clock.advance(Duration.ofMillis(random.nextInt(1200)));
      } else if (random.nextInt(4) == 0) {
        clock.advance(Duration.ofMillis(-random.nextInt((int) MAX_STEP_BACK.toMillis()))); // NTP
      }
      if (item.claim.isLost()) {
        violations.add("a key handed out was marked lost before its report: " + key);
      }
      if (random.nextInt(10) == 0) {
        batch.failed(item, new IllegalStateException("the provider failed"));
      } else {
        succeeded.add(key);
        batch.succeeded(item, "a-" + key);
      }
    }
  }
}
