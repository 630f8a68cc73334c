package dev.idempotency.tck;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.Batch;
import dev.idempotency.IdempotencyException;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.IdempotencyRecord;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.ResultCodec;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spi.RecordState;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Probe (probeY, SPEC 1) of fixbatch (b3d8cc0): many batches, each on its own thread and none ever
 * recorded (abandoned, as the Javadoc of {@link Batch} allows), send and report their keys while
 * another thread closes the guard with a short grace period (20 ms), so that some reports are
 * waited for by the close, some outlive it (one send in eight takes 30 to 60 ms: the close gives up
 * on it and its report, after the close, writes its own outcome). The rules, checked once every
 * thread and the close ended (bounded joins: a deadlock fails the round): no key is handed out
 * after {@code close()} returned; every key whose {@code succeeded()} returned is COMPLETED in the
 * store at once (no {@code record()}, no renewal left to write it later: a key left IN_PROGRESS
 * with its send done is a second send one lease later); and after the lease, guard B replays every
 * such key and sends every other key at most once (one send per key in all).
 *
 * <p>Real threads; each round has 4 threads, each claiming one batch of 6 keys, and starts the
 * close after a varying pause. On a store on request time the guards' clock is moved by hand
 * (leases of 4 s never run out during a round; guard B moves it past them); on a store on {@link
 * KeyStore#usesServerTime() server time} the leases are 2 s and guard B asks again (for 30 s at
 * most) while a key guard A left claimed is in progress.
 *
 * <p>Extend it with a store: implement {@link #newStore()} (one store for all rounds), and {@link
 * #closeStore(KeyStore)} if the store holds resources.
 */
public abstract class BatchesAbandonedRacingCloseContract {

  /** The idempotency window of the keys. */
  protected static final Duration TTL = Duration.ofHours(1);

  private static final int THREADS = 4;
  private static final int KEYS = 6;
  private static final Duration WAIT_LIMIT = Duration.ofSeconds(30);

  private final String name;
  private final int rounds;
  private KeyStore store;
  private boolean serverTime;
  private Duration lease;

  /**
   * The probe on a store.
   *
   * @param name the prefix of the keys, such as {@code "pg-"}
   * @param rounds how many rounds of four batches
   */
  protected BatchesAbandonedRacingCloseContract(String name, int rounds) {
    this.name = name;
    this.rounds = rounds;
  }

  /** The store under test, shared by the rounds. */
  protected abstract KeyStore newStore();

  /** Releases what {@link #newStore()} opened; nothing by default. */
  protected void closeStore(KeyStore store) {}

  @BeforeEach
  void openStore() {
    store = newStore();
    serverTime = store.usesServerTime();
    lease = serverTime ? Duration.ofSeconds(2) : Duration.ofSeconds(4);
  }

  @AfterEach
  void releaseStore() {
    if (store != null) {
      closeStore(store);
    }
  }

  /**
   * Abandoned batches racing the close: see the class.
   *
   * @throws Exception if the test is interrupted
   */
  @Test
  public void abandonedBatchesRacingTheCloseLeaveNoSentKeyInProgressAndSendEachKeyOnce()
      throws Exception {
    List<String> problems = new CopyOnWriteArrayList<>();
    AtomicInteger reportedInAll = new AtomicInteger();
    AtomicInteger reportsAfterClose = new AtomicInteger();
    AtomicInteger takenByB = new AtomicInteger();
    for (int round = 0; round < rounds && problems.isEmpty(); round++) {
      round(round, problems, reportedInAll, reportsAfterClose, takenByB);
    }
    assertThat(problems).isEmpty();
    assertThat(reportedInAll.get()).as("keys sent and reported by guard A").isPositive();
    assertThat(reportsAfterClose.get())
        .as("reports that began after the close returned (the race ran)")
        .isPositive();
    assertThat(takenByB.get())
        .as("keys guard A never sent (the close cut rounds short)")
        .isPositive();
  }

  /** A guard on the store: on the hand-moved clock unless the store keeps its own time. */
  private IdempotencyGuard.Builder guard(MutableClock clock) {
    IdempotencyGuard.Builder builder =
        IdempotencyGuard.builder().store(store).lease(lease).inFlightWait(Duration.ZERO);
    return serverTime ? builder : builder.clock(clock);
  }

  private void round(
      int round,
      List<String> problems,
      AtomicInteger reportedInAll,
      AtomicInteger reportsAfterClose,
      AtomicInteger takenByB)
      throws Exception {
    MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
    IdempotencyGuard guardA = guard(clock).closeGracePeriod(Duration.ofMillis(20)).build();
    Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();
    Set<String> reported = ConcurrentHashMap.newKeySet();
    List<String> allKeys = new CopyOnWriteArrayList<>();
    AtomicBoolean closeReturned = new AtomicBoolean();
    CountDownLatch claimed = new CountDownLatch(THREADS);
    List<Thread> senders = new ArrayList<>();
    for (int t = 0; t < THREADS; t++) {
      List<IdempotencyRequest> requests = new ArrayList<>();
      for (int k = 0; k < KEYS; k++) {
        String key =
            name + "abandoned-racing-close:" + round + ":" + t + ":" + k + ":" + UUID.randomUUID();
        allKeys.add(key);
        requests.add(IdempotencyRequest.of(key, TTL));
      }
      Thread sender =
          new Thread(
              () -> {
                Batch<String> batch;
                try {
                  batch = guardA.claimBatch(requests, ResultCodec.string());
                } finally {
                  claimed.countDown();
                }
                Iterator<Batch.Item> toSend = batch.toSend().iterator();
                while (true) {
                  boolean closedBefore = closeReturned.get();
                  Batch.Item item;
                  try {
                    if (!toSend.hasNext()) {
                      break;
                    }
                    item = toSend.next();
                  } catch (NoSuchElementException | IllegalStateException e) {
                    break;
                  }
                  if (closedBefore) {
                    problems.add(
                        "round "
                            + round
                            + ": "
                            + item.key()
                            + " handed out after close() returned");
                  }
                  sends.computeIfAbsent(item.key(), k -> new AtomicInteger()).incrementAndGet();
                  // the send: one in eight outlasts the close's grace period
                  ThreadLocalRandom random = ThreadLocalRandom.current();
                  pause(random.nextInt(8) == 0 ? 30 + random.nextInt(30) : random.nextInt(4));
                  boolean afterClose = closeReturned.get();
                  try {
                    batch.succeeded(item, "a:" + item.key());
                    reported.add(item.key());
                    if (afterClose) {
                      reportsAfterClose.incrementAndGet();
                    }
                  } catch (RuntimeException e) {
                    problems.add(
                        "round " + round + ": the report of " + item.key() + " threw " + e);
                  }
                } // never recorded: abandoned
              },
              "probeY-" + name + "batch-" + round + "-" + t);
      senders.add(sender);
    }
    senders.forEach(Thread::start);
    assertThat(claimed.await(30, TimeUnit.SECONDS)).as("every batch claimed").isTrue();
    pause(ThreadLocalRandom.current().nextInt(12));
    Thread closer =
        new Thread(
            () -> {
              guardA.close();
              closeReturned.set(true);
            },
            "probeY-" + name + "closer-" + round);
    closer.start();
    closer.join(60_000);
    if (closer.isAlive()) {
      problems.add("round " + round + ": close() did not return within 60 s (deadlock?)");
      return;
    }
    for (Thread sender : senders) {
      sender.join(60_000);
      if (sender.isAlive()) {
        problems.add("round " + round + ": " + sender.getName() + " did not end within 60 s");
        return;
      }
    }
    reportedInAll.addAndGet(reported.size());
    try (IdempotencyGuard guardB = guard(clock).build()) {
      for (String key : reported) {
        RecordState state = guardB.find(key).map(IdempotencyRecord::state).orElse(null);
        if (state != RecordState.COMPLETED) {
          problems.add("round " + round + ": " + key + " sent and reported, then left " + state);
        }
      }
      clock.advance(lease.plusSeconds(1)); // on request time, every lease guard A held ran out
      for (String key : allKeys) {
        String result;
        try {
          result =
              afterGuardAsLeases(
                  () ->
                      guardB.execute(
                          key,
                          TTL,
                          ctx -> {
                            sends.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
                            return "b:" + key;
                          }));
        } catch (IdempotencyException e) {
          problems.add("round " + round + ": guard B on " + key + " threw " + e);
          continue;
        }
        int sent = sends.getOrDefault(key, new AtomicInteger()).get();
        if (sent != 1) {
          problems.add(
              "round "
                  + round
                  + ": "
                  + key
                  + " sent "
                  + sent
                  + " times (reported by A: "
                  + reported.contains(key)
                  + ", B got "
                  + result
                  + ")");
        }
        if (result.startsWith("b:")) {
          takenByB.incrementAndGet();
        }
      }
    }
  }

  /**
   * On request time the clock already moved past guard A's leases: the call, once. On server time a
   * key guard A left claimed is taken over once its lease ran out: the call again while the key is
   * in progress, for {@link #WAIT_LIMIT} at most (then its last in-progress answer is thrown).
   */
  private String afterGuardAsLeases(Supplier<String> call) {
    if (!serverTime) {
      return call.get();
    }
    long deadline = System.nanoTime() + WAIT_LIMIT.toNanos();
    while (true) {
      try {
        return call.get();
      } catch (IdempotencyInProgressException e) {
        if (System.nanoTime() - deadline > 0) {
          throw e;
        }
        pause(20);
      }
    }
  }

  private static void pause(int millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError(e);
    }
  }
}
