package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spi.StoredRecord;
import dev.idempotency.tck.ForwardingKeyStore;
import dev.idempotency.tck.ObservedKeyStore;
import dev.idempotency.testservers.Poll;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * SPEC section 14, during a store outage: each caller gets its error at once, the log gets one WARN
 * line (not a stack trace per call), and the store answers again without a restart; and repeats
 * waiting for an in-flight key back off instead of polling the store hot.
 */
class StoreOutageTest {

  static final Duration TTL = Duration.ofHours(1);
  final ObservedKeyStore store = new ObservedKeyStore(InMemoryKeyStore.builder().build());
  final ExecutorService pool = Executors.newCachedThreadPool();

  @AfterEach
  void stopThreads() throws InterruptedException {
    pool.shutdownNow();
    assertThat(pool.awaitTermination(30, TimeUnit.SECONDS)).isTrue();
  }

  static String key() {
    return "outage:" + UUID.randomUUID();
  }

  @Test
  void anOutageLogsOneWarningLineRefusesCallsAtOnceAndEndsWhenTheStoreAnswers() throws Exception {
    IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
    PrintStream original = System.err;
    ByteArrayOutputStream captured = new ByteArrayOutputStream();
    System.setErr(new PrintStream(captured, true, StandardCharsets.UTF_8));
    int sent = 0;
    int refused = 0;
    int claimsWhileDown;
    try {
      store.failClaims.set(Integer.MAX_VALUE);
      for (int i = 0; i < 200; i++) {
        try {
          guard.execute(key(), TTL, ctx -> "sent");
          sent++;
        } catch (KeyStoreException expected) {
          refused++;
        }
      }
      claimsWhileDown = store.claims.get();
      store.failClaims.set(0);
      awaitAnswer(guard);
    } finally {
      System.setErr(original);
    }
    String log = captured.toString(StandardCharsets.UTF_8);

    assertThat(sent).isZero();
    assertThat(refused).isEqualTo(200);
    assertThat(claimsWhileDown)
        .as("after a few failures, calls are refused without asking the store, but for probes")
        .isLessThan(20);
    assertThat(log.lines().filter(line -> line.contains("WARN"))).hasSize(1);
    assertThat(log).doesNotContain("\tat ").contains("key store is failing");
    assertThat(log).contains("answers again");
  }

  private static void awaitAnswer(IdempotencyGuard guard) throws InterruptedException {
    Poll.within(Duration.ofSeconds(30))
        .ignoring(KeyStoreException.class)
        .until(
            "the guard to try the store again",
            () -> guard.execute(key(), TTL, ctx -> "sent"),
            sent -> true);
  }

  @Test
  void aRefusedCallSaysTheStoreIsFailingAndWhy() {
    IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
    store.failClaims.set(Integer.MAX_VALUE);
    store.failFinds.set(Integer.MAX_VALUE); // the guard's probe finds the store down too
    assertThatThrownBy(() -> guard.execute(key(), TTL, ctx -> "sent"))
        .isInstanceOf(KeyStoreException.class);

    assertThatThrownBy(() -> guard.execute(key(), TTL, ctx -> "sent"))
        .isInstanceOf(KeyStoreException.class)
        .hasMessageContaining("key store is failing")
        .hasMessageContaining("nothing was sent");
  }

  /**
   * A store whose every operation fails after a wait, as a database that refuses connections does
   * behind a pool's connection timeout.
   */
  static final class SlowlyFailingStore extends ForwardingKeyStore {
    final java.util.concurrent.atomic.AtomicBoolean down =
        new java.util.concurrent.atomic.AtomicBoolean();
    final AtomicInteger claims = new AtomicInteger();
    final AtomicInteger probes = new AtomicInteger();
    final long failAfterMillis;

    SlowlyFailingStore(KeyStore delegate, long failAfterMillis) {
      super(delegate);
      this.failAfterMillis = failAfterMillis;
    }

    private void failIfDown() {
      if (down.get()) {
        try {
          Thread.sleep(failAfterMillis); // a store that takes this long to fail: under test
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
        throw new KeyStoreException("Connection refused", null);
      }
    }

    @Override
    public ClaimResult claim(ClaimRequest request) {
      claims.incrementAndGet();
      failIfDown();
      return delegate.claim(request);
    }

    @Override
    public java.util.Optional<StoredRecord> find(String keyId, java.time.Instant now) {
      probes.incrementAndGet();
      failIfDown();
      return delegate.find(keyId, now);
    }

    @Override
    public boolean delete(String keyId, java.time.Instant now) {
      failIfDown();
      return delegate.delete(keyId, now);
    }
  }

  /**
   * SPEC 14, "each caller gets its error at once": once one claim has seen the store fail, later
   * callers are refused without waiting for the store, however slowly it fails, while the guard's
   * own probe (not a caller) checks it in the background; and once it answers again the calls go
   * through, without a restart, within about a second.
   */
  @Test
  void afterOneFailureEveryCallerIsRefusedAtOnceWhileTheGuardProbesTheStore() throws Exception {
    SlowlyFailingStore slow = new SlowlyFailingStore(InMemoryKeyStore.builder().build(), 300);
    IdempotencyGuard guard = IdempotencyGuard.builder().store(slow).build();
    slow.down.set(true);
    assertThatThrownBy(() -> guard.execute(key(), TTL, ctx -> "sent"))
        .isInstanceOf(KeyStoreException.class)
        .hasMessageContaining("Connection refused");

    IdempotencyGuardTest.await(() -> slow.probes.get() >= 2, "the guard to probe the store");
    long slowest = 0;
    for (int i = 0; i < 10; i++) {
      long start = System.nanoTime();
      assertThatThrownBy(() -> guard.execute(key(), TTL, ctx -> "sent"))
          .isInstanceOf(KeyStoreException.class)
          .hasMessageContaining("nothing was sent")
          .hasMessageContaining("Connection refused");
      slowest = Math.max(slowest, System.nanoTime() - start);
    }

    assertThat(slow.claims).as("claims that reached the failing store").hasValue(1);
    assertThat(TimeUnit.NANOSECONDS.toMillis(slowest))
        .as("the slowest refusal, against the store's 300 ms to fail")
        .isLessThan(150);

    slow.down.set(false);
    long recovered = System.nanoTime();
    IdempotencyGuardTest.await(
        () -> {
          try {
            return guard.execute(key(), TTL, ctx -> "sent").equals("sent");
          } catch (KeyStoreException stillRefused) {
            return false;
          }
        },
        "a call to go through after the store answers again");
    assertThat(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - recovered))
        .as("recovery after the store answers again")
        .isLessThan(5_000);
  }

  /** Five repeats waiting two seconds for one in-flight key back off: few claims each. */
  @Test
  void repeatsWaitingForAnInFlightKeyBackOff() throws Exception {
    IdempotencyGuard guard =
        IdempotencyGuard.builder().store(store).inFlightWait(Duration.ofSeconds(2)).build();
    String key = key();
    CountDownLatch sending = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    Future<String> first =
        pool.submit(
            () ->
                guard.execute(
                    key,
                    TTL,
                    ctx -> {
                      sending.countDown();
                      release.await(30, TimeUnit.SECONDS);
                      return "first";
                    }));
    assertThat(sending.await(30, TimeUnit.SECONDS)).isTrue();
    int before = store.claims.get();
    List<Future<Object>> repeats = new ArrayList<>();
    for (int i = 0; i < 5; i++) {
      repeats.add(
          pool.submit(
              () -> {
                try {
                  return guard.execute(key, TTL, ctx -> "repeat");
                } catch (IdempotencyInProgressException e) {
                  return e;
                }
              }));
    }
    for (Future<Object> repeat : repeats) {
      assertThat(repeat.get(30, TimeUnit.SECONDS))
          .isInstanceOf(IdempotencyInProgressException.class);
    }
    int claims = store.claims.get() - before;
    release.countDown();
    first.get(30, TimeUnit.SECONDS);

    assertThat(claims).as("claims by five repeats over two seconds").isBetween(5, 65);
  }

  /**
   * A caller whose own thread was interrupted (a pool gives up its wait for a connection then) got
   * a failure that says nothing of the store: the other callers must not be refused for it.
   */
  @Test
  void aClaimThatFailedBecauseItsCallerWasInterruptedDoesNotOpenTheBreaker() {
    KeyStore failsWhenInterrupted =
        new dev.idempotency.tck.ForwardingKeyStore(store) {
          @Override
          public dev.idempotency.spi.ClaimResult claim(dev.idempotency.spi.ClaimRequest request) {
            if (Thread.currentThread().isInterrupted()) {
              throw new KeyStoreException("Interrupted during connection acquisition", null);
            }
            return delegate.claim(request);
          }
        };
    IdempotencyGuard guard = IdempotencyGuard.builder().store(failsWhenInterrupted).build();

    Thread.currentThread().interrupt();
    try {
      assertThatThrownBy(() -> guard.execute(key(), TTL, ctx -> "sent"))
          .isInstanceOf(KeyStoreException.class);
    } finally {
      Thread.interrupted();
    }

    assertThat(guard.execute(key(), TTL, ctx -> "sent")).isEqualTo("sent");
  }

  /**
   * A fail-open guard after one failure: the store answers again, and a repeat of a key it
   * completed must be replayed from it, not sent again because the breaker refused without asking.
   */
  @Test
  void aFailOpenGuardAsksTheStoreEvenWhileTheBreakerIsOpen() {
    IdempotencyGuard guard = IdempotencyGuard.builder().store(store).failOpen(true).build();
    AtomicInteger sends = new AtomicInteger();
    String completed = key();
    assertThat(guard.execute(completed, TTL, ctx -> "sent-" + sends.incrementAndGet()))
        .isEqualTo("sent-1");

    store.failFinds.set(
        Integer.MAX_VALUE); // the probe finds the store down: the breaker stays open
    store.failClaims.set(1);
    guard.execute(key(), TTL, ctx -> "fail-open-" + sends.incrementAndGet()); // opens the breaker

    assertThat(guard.execute(completed, TTL, ctx -> "sent-" + sends.incrementAndGet()))
        .as("a repeat of a completed key, the store answering")
        .isEqualTo("sent-1");
    assertThat(sends).hasValue(2);
  }

  /** A probe that throws an Error (a store's bug) still leaves a next probe scheduled. */
  @Test
  void aProbeThatThrowsAnErrorIsRetriedAndTheGuardRecovers() throws Exception {
    AtomicInteger finds = new AtomicInteger();
    KeyStore breaksOnce =
        new dev.idempotency.tck.ForwardingKeyStore(store) {
          @Override
          public java.util.Optional<dev.idempotency.spi.StoredRecord> find(
              String keyId, java.time.Instant now) {
            if (finds.incrementAndGet() == 1) {
              throw new AssertionError("a store bug in find");
            }
            return delegate.find(keyId, now);
          }
        };
    IdempotencyGuard guard = IdempotencyGuard.builder().store(breaksOnce).build();
    store.failClaims.set(1);
    assertThatThrownBy(() -> guard.execute(key(), TTL, ctx -> "sent"))
        .isInstanceOf(KeyStoreException.class);

    awaitAnswer(guard);
    assertThat(finds.get()).isGreaterThanOrEqualTo(2);
  }

  /**
   * The one trial claim after a probe was answered is lost: its caller's thread was interrupted (a
   * pool refuses an interrupted wait; Spring MVC interrupts a timed-out {@code Callable}), or the
   * store threw an {@link Error}. Neither says the store is down, and neither may hold every other
   * call back until the trial's 30 s timeout: the next claim becomes the trial.
   */
  @ParameterizedTest
  @ValueSource(strings = {"interrupt", "error"})
  void aTrialClaimLostToAnInterruptOrAnErrorHandsTheTrialToTheNextClaim(String how)
      throws Exception {
    AtomicBoolean errorNext = new AtomicBoolean();
    AtomicInteger lostReached = new AtomicInteger();
    KeyStore lossy =
        new dev.idempotency.tck.ForwardingKeyStore(store) {
          @Override
          public dev.idempotency.spi.ClaimResult claim(dev.idempotency.spi.ClaimRequest request) {
            if (errorNext.getAndSet(false)) {
              lostReached.incrementAndGet();
              throw new NoClassDefFoundError("a driver class (test)");
            }
            if (Thread.currentThread().isInterrupted()) {
              lostReached.incrementAndGet();
              throw new KeyStoreException("Interrupted during connection acquisition", null);
            }
            return delegate.claim(request);
          }
        };
    IdempotencyGuard guard = IdempotencyGuard.builder().store(lossy).build();
    store.failClaims.set(1);
    assertThatThrownBy(() -> guard.execute(key(), TTL, ctx -> "sent"))
        .isInstanceOf(KeyStoreException.class);

    // lose the trial: attempts are refused at once until the probe was answered, then one is it
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (lostReached.get() == 0) {
      assertThat(System.nanoTime()).as("a trial claim was made").isLessThan(deadline);
      if (how.equals("error")) {
        errorNext.set(true);
      } else {
        Thread.currentThread().interrupt();
      }
      try {
        guard.execute(key(), TTL, ctx -> "sent");
      } catch (KeyStoreException | NoClassDefFoundError expected) {
        // refused by the breaker, or the lost trial itself
      } finally {
        Thread.interrupted();
        errorNext.set(false);
      }
      Thread.sleep(10); // a pause between two attempts of this bounded loop
    }

    String sent =
        Poll.within(Duration.ofSeconds(30))
            .ignoring(KeyStoreException.class) // refused by the breaker until its probe answered
            .until(
                "a claim after the lost trial to reach the answering store",
                () -> guard.execute(key(), TTL, ctx -> "sent"),
                "sent"::equals);
    assertThat(sent).isEqualTo("sent");
  }

  /**
   * Renewals fail while claims succeed (a partial outage: one shard of a cluster, a lock on the
   * renewed rows). The keeper says so once, and new calls are not refused: a failed renewal says
   * nothing of whether a claim can be made, and it used to open the breaker (and log a WARN and an
   * INFO) every round.
   */
  @Test
  void renewalsThatFailWhileClaimsSucceedWarnOnceAndRefuseNoCall() throws Exception {
    AtomicBoolean renewalsFail = new AtomicBoolean(true);
    AtomicInteger failedRounds = new AtomicInteger();
    KeyStore renewalsDown =
        new dev.idempotency.tck.ForwardingKeyStore(store) {
          @Override
          public java.util.List<Boolean> extendAll(
              java.util.List<dev.idempotency.spi.ExtendRequest> requests) {
            if (renewalsFail.get()) {
              failedRounds.incrementAndGet();
              throw new KeyStoreException("the renewed keys' shard is down (test)", null);
            }
            return delegate.extendAll(requests);
          }

          @Override
          public boolean extend(dev.idempotency.spi.ExtendRequest request) {
            if (renewalsFail.get()) {
              failedRounds.incrementAndGet();
              throw new KeyStoreException("the renewed keys' shard is down (test)", null);
            }
            return delegate.extend(request);
          }
        };
    IdempotencyGuard guard =
        IdempotencyGuard.builder().store(renewalsDown).lease(Duration.ofMillis(400)).build();
    PrintStream original = System.err;
    ByteArrayOutputStream captured = new ByteArrayOutputStream();
    System.setErr(new PrintStream(captured, true, StandardCharsets.UTF_8));
    java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
    int refused = 0;
    try {
      java.util.concurrent.Future<?> slow =
          pool.submit(
              () -> {
                try {
                  guard.execute(
                      key(),
                      TTL,
                      ctx -> {
                        release.await(30, TimeUnit.SECONDS);
                        return "slow";
                      });
                } catch (RuntimeException lostItsLease) {
                  // its lease ran out unrenewed: what it met is not this test's point
                }
                return null;
              });
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (failedRounds.get() < 3) {
        assertThat(System.nanoTime()).as("three failed renewal rounds").isLessThan(deadline);
        try {
          guard.execute(key(), TTL, ctx -> "sent");
        } catch (KeyStoreException e) {
          refused++;
        }
        Thread.sleep(5); // a pause between two calls of this bounded loop
      }
      release.countDown();
      slow.get(30, TimeUnit.SECONDS);
    } finally {
      release.countDown();
      System.setErr(original);
    }
    String log = captured.toString(StandardCharsets.UTF_8);
    assertThat(
            log.lines().filter(line -> line.contains("WARN") && line.contains("Could not renew")))
        .as(log)
        .hasSize(1);
    assertThat(log).as("claims never failed").doesNotContain("key store is failing:");
    assertThat(refused).as("no call refused").isZero();
  }
}
