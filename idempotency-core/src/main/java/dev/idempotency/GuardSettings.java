package dev.idempotency;

import dev.idempotency.spi.AsyncKeyStore;
import dev.idempotency.spi.KeyStore;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.concurrent.Executor;

/**
 * Everything one guard was built with, shared by its calls, its batches and its lease keeper.
 * Immutable apart from the keeper's own state.
 */
final class GuardSettings {

  /** The store as the guard calls it: the user's, timed when observers are registered. */
  final KeyStore store;

  /** The user's store, as given. */
  final KeyStore userStore;

  final AsyncKeyStore asyncStore;
  final Observers observers;
  final boolean mdc;
  final Duration lease;
  final long leaseNanos;
  final Duration inFlightWait;
  final Clock clock;
  final TakeoverPolicy takeoverPolicy;
  final FailureClassifier failureClassifier;
  final boolean failOpen;
  private final java.util.Map<String, Boolean> failOpenByOperation;
  final int completionAttempts;
  final boolean storeRawKeys;
  final Listeners listeners;
  final Executor blockingStoreExecutor;
  final Executor asyncExecutor;
  final boolean leaseRenewal;
  final long leaseRenewalLimitNanos;
  final LeaseKeeper keeper;

  /** Outcomes the calls could not record, written in the background while their leases hold. */
  final PendingOutcomes pendingOutcomes;

  /** The executors this guard created itself, which {@link #close} shuts down. */
  final DefaultExecutors executors;

  /** The calls running now, which {@link #close} lets finish within {@link #closeGraceNanos}. */
  final CallsInFlight inFlight = new CallsInFlight();

  /** The async calls' stages not yet complete, which {@link #close} completes if it gives up. */
  final PendingStages pendingStages = new PendingStages();

  final long closeGraceNanos;
  final StoreOutages outages;
  final OperationNames operations;

  /** Completed records kept in memory, or {@code null} when the near cache is off. */
  final NearCache.Records nearCache;

  /** Whether a call of this operation sends anyway when the store fails before the claim. */
  boolean failsOpen(String operation) {
    Boolean own = failOpenByOperation.get(operation);
    return own != null ? own : failOpen;
  }

  GuardSettings(IdempotencyGuard.Builder builder) {
    this.userStore = builder.store;
    this.observers = new Observers(builder.observers);
    this.store = TimedStore.of(builder.store, observers);
    this.mdc = builder.mdc;
    this.lease = builder.lease;
    this.leaseNanos = builder.lease.toNanos();
    this.inFlightWait = builder.inFlightWait;
    this.clock = builder.clock;
    this.takeoverPolicy = builder.takeoverPolicy;
    this.failureClassifier = builder.failureClassifier;
    this.failOpen = builder.failOpen;
    this.failOpenByOperation = java.util.Map.copyOf(builder.failOpenByOperation);
    this.completionAttempts = builder.completionAttempts;
    this.storeRawKeys = builder.storeRawKeys;
    this.listeners = new Listeners(builder.listeners, observers);
    this.executors = new DefaultExecutors();
    this.blockingStoreExecutor =
        builder.blockingStoreExecutor != null ? builder.blockingStoreExecutor : executors.storeIo();
    this.asyncExecutor = builder.asyncExecutor != null ? builder.asyncExecutor : executors.async();
    this.asyncStore = AsyncStores.of(store, blockingStoreExecutor);
    this.leaseRenewal = builder.leaseRenewal;
    this.leaseRenewalLimitNanos = builder.leaseRenewalLimit.toNanos();
    this.closeGraceNanos = builder.closeGracePeriod.toNanos();
    this.outages = new StoreOutages(userStore, clock, executors::prober);
    this.operations = new OperationNames(builder.maxOperationNames);
    this.nearCache =
        builder.nearCache == null
            ? null
            : new NearCache.Records(builder.nearCache, store.usesServerTime());
    this.keeper = new LeaseKeeper(this);
    this.pendingOutcomes = new PendingOutcomes(this, builder.maxPendingOutcomes);
  }

  /**
   * Now, in nanoseconds on the clock the store measures leases with: the guard's clock for a store
   * that takes time from requests, the monotonic clock for one that keeps time on its server. A
   * claim's lease deadline, as the guard estimates it, is on this scale.
   */
  long leaseNow() {
    if (store.usesServerTime()) {
      return System.nanoTime();
    }
    return epochNanos(clock.instant());
  }

  /** {@link #leaseNow()} for a request stamped {@code now}: the same instant on that scale. */
  long leaseNow(Instant now) {
    return store.usesServerTime() ? System.nanoTime() : epochNanos(now);
  }

  /** Whether {@link #close} was called. */
  boolean closed() {
    return inFlight.closed();
  }

  /** Set by {@link #close} once its grace period is over: it waits for no call any more. */
  private volatile boolean gaveUp;

  /**
   * Whether {@link #close} gave up on the calls still running (its grace period passed): from then
   * on no claim goes to the store and no send starts, and a claim granted meanwhile is released,
   * fenced, by the thread that holds it ({@link SendLease#closedBeforeSend}).
   */
  boolean gaveUp() {
    return gaveUp;
  }

  /**
   * Closes the guard's resources. New calls are refused at once; the calls running let finish for
   * at most {@link #closeGraceNanos}, their leases renewed and their outcomes recorded meanwhile;
   * what is left then is abandoned as a crash would leave it (one WARN says how many), a background
   * outcome write already in the store first let finish, never interrupted ({@link
   * PendingOutcomes#close}). Then the keeper writes what unrecorded batches reported and stops, and
   * the executors the guard created are shut down. {@code executorMillis} bounds the whole wait on
   * the guard's own threads after the grace period: that write and the executors' queued work.
   * Idempotent; a second caller returns once the first has finished.
   *
   * @return {@code false} if it was closed already
   */
  boolean close(long executorMillis) {
    if (!inFlight.close()) {
      awaitClosed(); // a concurrent close returns once the guard is closed, not before
      return false;
    }
    try {
      closeOnce(executorMillis);
    } finally {
      closed.countDown();
    }
    return true;
  }

  /** Counted down once the first {@link #close} has finished. */
  private final java.util.concurrent.CountDownLatch closed =
      new java.util.concurrent.CountDownLatch(1);

  private void awaitClosed() {
    try {
      closed.await();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt(); // the caller's: kept; it stops waiting
    }
  }

  private void closeOnce(long executorMillis) {
    inFlight.awaitNone(closeGraceNanos);
    gaveUp = true;
    long deadline = monoNow() + java.util.concurrent.TimeUnit.MILLISECONDS.toNanos(executorMillis);
    // waits for a background write in progress (within the deadline), then abandons what is left
    // and WARNs itself: its outcomes have all ended when it returns, so are not counted below
    pendingOutcomes.close(deadline);
    int abandoned = inFlight.running();
    if (abandoned > 0) {
      CallEvents.log.warn(
          "Closed the idempotency guard with {} calls still running after its grace period of {}"
              + " ms: their leases are no longer renewed and their outcomes may not be recorded;"
              + " as after a crash, their keys can be taken over one lease after their last"
              + " renewal",
          abandoned,
          java.util.concurrent.TimeUnit.NANOSECONDS.toMillis(closeGraceNanos));
    }
    keeper.close();
    executors.shutdown( // what is left of the one bound for the guard's own threads
        Math.max(0, java.util.concurrent.TimeUnit.NANOSECONDS.toMillis(deadline - monoNow())));
    int ended = pendingStages.abandonAll(); // dropped from a stopped pool: never run nor rejected
    if (ended > 0) {
      CallEvents.log.info( // the WARN above counted them already: one WARN per close
          "Ended {} async calls abandoned by the close of the idempotency guard: their callers get"
              + " an IllegalStateException; their keys are left as after a crash",
          ended);
    }
  }

  /** Now on the monotonic clock, for schedules: {@link System#nanoTime()}. */
  static long monoNow() {
    return System.nanoTime();
  }

  private static long epochNanos(Instant instant) {
    return instant.getEpochSecond() * 1_000_000_000L + instant.getNano();
  }
}
