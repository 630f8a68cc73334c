package dev.idempotency.tck;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.Batch;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.IdempotencyRecord;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.KeyStoreException;
import dev.idempotency.ResultCodec;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spi.RecordState;
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
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * probeT (SPEC 1: at most one send per key within its window, and no lost send): four threads
 * iterate one batch's {@code toSend()} at once while the store fails (does not answer) some of the
 * renewals, seeded, as the subclass injects them ({@link #beforeRenewal()}, {@link
 * #afterRenewal(int)}); the sending threads move the guard's clock forward as they go (and now and
 * then back, an NTP correction), so that most hand-outs renew the batch's keys on their own thread
 * ({@code BatchLeases.renewBefore}) and the keeper's rounds come too late to matter. Rounds of
 * eight keys. The rule checked on every hand-out and report:
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
 * <p>Lease 4 s, the store on the guard's clock. Guard A uses the store behind the failures, guard B
 * the store itself. Tagged extended for its length.
 *
 * <p>Extend it with a store: implement {@link #newStore()} (and {@link #closeStore(KeyStore)} if
 * the store holds resources), the failures, and {@link #claimLost(Batch.Item)} and {@link
 * #keyId(Batch.Item)}, which read the guard's package-private state of an item (so the subclass
 * lives in package {@code dev.idempotency}).
 */
public abstract class BatchManyIteratorsFlakyRenewalsContract {

  /** The idempotency window of the keys. */
  protected static final Duration TTL = Duration.ofHours(1);

  /** The guards' lease. */
  protected static final Duration LEASE = Duration.ofSeconds(4);

  /** The keeper's margin: a key handed out has a lease reaching this far past the guard's time. */
  protected static final Duration MARGIN = LEASE.dividedBy(4);

  /** The most the sending threads step the guard's clock back. */
  protected static final Duration MAX_STEP_BACK = Duration.ofMillis(1000);

  private static final int KEYS = 8;
  private static final int THREADS = 4;

  private final MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  private final Random faults = new Random(20261206L);
  private final AtomicInteger failedRenewals = new AtomicInteger();
  private final AtomicInteger answeredRenewals = new AtomicInteger();
  private final Set<String> refused = ConcurrentHashMap.newKeySet();
  private final String name;
  private final String label;
  private final int rounds;
  private final int minFailedRenewals;
  private KeyStore store;
  private IdempotencyGuard guardA;
  private IdempotencyGuard guardB;

  /**
   * The scenario on a store.
   *
   * @param name the prefix of the keys and of the sending threads' names, such as {@code "pg-"}
   * @param label what the failure message names the store by, such as {@code "PostgreSQL "}
   * @param rounds how many batches of eight keys
   * @param minFailedRenewals the failed renewals the run needs to count for anything
   */
  protected BatchManyIteratorsFlakyRenewalsContract(
      String name, String label, int rounds, int minFailedRenewals) {
    this.name = name;
    this.label = label;
    this.rounds = rounds;
    this.minFailedRenewals = minFailedRenewals;
  }

  /** A fresh store under test, its lease set from the request's time. */
  protected abstract KeyStore newStore();

  /** Releases what {@link #newStore()} opened; nothing by default. */
  protected void closeStore(KeyStore store) {}

  /**
   * Before a renewal (single or batch) reaches the store: may fail it with {@link #fail(String)}.
   *
   * @return the renewal's draw (from {@link #draw()}), passed to {@link #afterRenewal(int)}
   */
  protected abstract int beforeRenewal();

  /**
   * After the store applied a renewal: may lose its answer with {@link #fail(String)}; nothing by
   * default.
   *
   * @param draw what {@link #beforeRenewal()} returned
   */
  protected void afterRenewal(int draw) {}

  /**
   * Whether the item's claim was marked lost ({@code item.claim.isLost()}).
   *
   * @param item a key handed out
   * @return {@code true} if lost
   */
  protected abstract boolean claimLost(Batch.Item item);

  /**
   * The item's key as the store knows it ({@code item.call.keyId}).
   *
   * @param item a key handed out
   * @return its key id
   */
  protected abstract String keyId(Batch.Item item);

  /**
   * A number from 0 to 99, from the seeded source of the failures.
   *
   * @return the draw
   */
  protected final int draw() {
    synchronized (faults) {
      return faults.nextInt(100);
    }
  }

  /**
   * Counts a failed renewal and throws it.
   *
   * @param message what the store's failure says
   * @throws KeyStoreException always
   */
  protected final void fail(String message) {
    failedRenewals.incrementAndGet();
    throw new KeyStoreException(message, null);
  }

  /** Counts an answered renewal. */
  protected final void answered() {
    answeredRenewals.incrementAndGet();
  }

  @BeforeEach
  void startGuards() {
    store = newStore();
    KeyStore flaky =
        new ForwardingKeyStore(store) {
          @Override
          public boolean extend(ExtendRequest request) {
            int draw = beforeRenewal();
            boolean extended = delegate.extend(request);
            afterRenewal(draw);
            if (!extended) {
              refused.add(request.keyId());
            }
            return extended;
          }

          @Override
          public List<Boolean> extendAll(List<ExtendRequest> requests) {
            int draw = beforeRenewal();
            List<Boolean> extended = delegate.extendAll(requests);
            afterRenewal(draw);
            for (int i = 0; i < requests.size(); i++) {
              if (!extended.get(i)) {
                refused.add(requests.get(i).keyId()); // a late renewal of an outcome written
              }
            }
            return extended;
          }
        };
    guardA = guard(flaky);
    guardB = guard(store);
  }

  private IdempotencyGuard guard(KeyStore keyStore) {
    return IdempotencyGuard.builder()
        .store(keyStore)
        .clock(clock)
        .lease(LEASE)
        .inFlightWait(Duration.ZERO)
        .build();
  }

  @AfterEach
  void closeGuards() {
    if (guardA != null) {
      guardA.close();
    }
    if (guardB != null) {
      guardB.close();
    }
    if (store != null) {
      closeStore(store);
    }
  }

  /**
   * Many threads iterating one batch while renewals fail: see the class.
   *
   * @throws Exception if the test is interrupted
   */
  @Tag("extended")
  @Test
  public void keysHandedOutByManyThreadsAreNeverLostOrLapsedAndUnrenewableKeysAreNeverSent()
      throws Exception {
    List<String> violations = new CopyOnWriteArrayList<>();
    int handedOutTotal = 0;
    int lapsedTotal = 0;
    for (int round = 0; round < rounds && violations.isEmpty(); round++) {
      String id = UUID.randomUUID().toString();
      List<IdempotencyRequest> requests = new ArrayList<>();
      for (int k = 0; k < KEYS; k++) {
        requests.add(
            IdempotencyRequest.of(name + "flaky-batch:" + round + ":" + k + ":" + id, TTL));
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
                "probeT-" + name + "sender-" + t);
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
            && claimLost(item)
            && !refused.contains(keyId(item))) {
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
    assertThat(violations).isEmpty();
    assertThat(failedRenewals.get())
        .as(
            "%srenewals failed (%d answered; %d handed out, %d lapsed)",
            label, answeredRenewals.get(), handedOutTotal, lapsedTotal)
        .isGreaterThan(minFailedRenewals);
    assertThat(lapsedTotal).as("keys lapsed").isPositive();
    assertThat(handedOutTotal).as("keys handed out").isGreaterThan(rounds);
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
      if (claimLost(item)) {
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
