package dev.idempotency.tck;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.Batch;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.KeyStoreException;
import dev.idempotency.ResultCodec;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.KeyStore;
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
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * probeO (SPEC 1: at most one send per key within its window): two threads iterate one batch
 * ({@code toSend()} from several threads, as documented). Thread 1's hand-out check renews, on its
 * thread, every unreported key whose lease ends before its horizon ({@code
 * BatchLeases.renewBefore}); it sorts them when it scans: keys not handed out yet go to {@code
 * renewNow}, which marks every claim of a chunk lost if the store fails. While that renewal is on
 * its way, thread 2 hands out one of those keys: its own check takes the lock-free fast path of
 * {@code renewBefore} (the bound of the earliest lease still clears its horizon) and finds the
 * claim live, since the failure has not landed. Then the renewal fails: the key now being sent is
 * lost, the keeper never renews it again, and thread 1's own check lapses it ({@code
 * BatchHandOut.lapse} sets LAPSED on an item another thread handed out). Its lease runs out under
 * the running send and another guard sends again.
 *
 * <p>The failure must not mark the key lost: the keeper goes on renewing it while its send runs,
 * and guard B, asking after its first lease would have run out, finds it in progress.
 *
 * <p>To make the interleaving deterministic, the guard's clock steps back one second (an NTP
 * correction) between thread 1's scan and thread 2's check: thread 2's horizon then clears the
 * bound thread 1's did not. On a clock that never steps back the same loss needs thread 2 to pass
 * {@code stillLive} just before thread 1's scan and call {@code markHandedOut} just after it (a
 * window of a few instructions). The store under test sits behind one whose renewal, on thread 1
 * only, waits for the test and then fails (the store did not answer); lease 8 s, the guard's clock
 * moved by hand (the store on the guard's clock).
 *
 * <p>Extend it with a store: implement {@link #newStore()}, and {@link #closeStore(KeyStore)} if
 * the store holds resources; {@link #name()} tells the keys and the thread of each store apart.
 */
public abstract class BatchConcurrentHandOutFailedRenewalContract {

  /** The idempotency window of the keys. */
  protected static final Duration TTL = Duration.ofHours(1);

  /** The guards' lease. */
  protected static final Duration LEASE = Duration.ofSeconds(8);

  private final MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  private final AtomicBoolean armed = new AtomicBoolean(true);
  private final CountDownLatch renewalSent = new CountDownLatch(1);
  private final CountDownLatch failRenewal = new CountDownLatch(1);
  private String failingThread;
  private KeyStore store;
  private IdempotencyGuard guardA;
  private IdempotencyGuard guardB;

  /** A fresh store under test, its lease set from the request's time. */
  protected abstract KeyStore newStore();

  /** Releases what {@link #newStore()} opened; nothing by default. */
  protected void closeStore(KeyStore store) {}

  /**
   * The prefix of the keys and of the failing thread's name, such as {@code "postgres-"}; none by
   * default.
   *
   * @return the prefix
   */
  protected String name() {
    return "";
  }

  @BeforeEach
  void startGuards() {
    failingThread = name() + "batch-hand-out-1";
    store = newStore();
    KeyStore failingOnThread1 =
        new ForwardingKeyStore(store) {
          @Override
          public List<Boolean> extendAll(List<ExtendRequest> requests) {
            if (Thread.currentThread().getName().equals(failingThread)
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
    guardA = guard(failingOnThread1);
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
    failRenewal.countDown();
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
   * A key handed out on thread 2 while thread 1's hand-out renewal of it fails is still renewed by
   * the keeper, is not lapsed, and is sent once.
   *
   * @throws Exception if the test is interrupted
   */
  @Test
  public void aKeyHandedOutWhileAnotherThreadsRenewalFailsIsStillRenewed() throws Exception {
    String a = name() + "batch-concurrent-a:" + UUID.randomUUID();
    String y = name() + "batch-concurrent-y:" + UUID.randomUUID();
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
          new Thread(() -> thread1Found.set(batch.toSend().iterator().hasNext()), failingThread);
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
