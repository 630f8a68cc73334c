package dev.idempotency;

import dev.idempotency.spi.KeyStore;
import java.time.Clock;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What a guard does during a store outage, as a circuit breaker whose half-open probe is the
 * guard's own, not a caller's:
 *
 * <ol>
 *   <li><b>Closed</b> (the store answers): claims go to the store. The first failure of a claim or
 *       renewal opens the breaker and logs one WARN line (its stack trace at DEBUG).
 *   <li><b>Open</b>: new claims are refused at once, without asking the store ({@link #refusal()}),
 *       so each caller gets its error immediately instead of waiting out a timeout, and the store
 *       is not flooded as it comes back. Meanwhile one probe at a time, on a thread of the guard's
 *       own, reads a record that does not exist ({@link KeyStore#find}): 50 ms after the failure,
 *       then twice as long after each failed probe, at most a second apart.
 *   <li><b>Half-open</b>: once a probe is answered, the next claim (or lookup or deletion of one
 *       record, {@link #singleRecord}) goes to the store (one at a time; the others are still
 *       refused). Its answer closes the breaker, with one INFO line saying how many operations
 *       failed meanwhile; its failure opens it again.
 * </ol>
 *
 * A claim that waits in a queue before it reaches the store (an async call's claim on a blocking
 * store's executor) asks the breaker when it starts ({@link #refusal()}), not only when it was
 * queued ({@link #refusalBeforeQueueing()}), so a backlog queued before the first failure is
 * refused at once rather than asking a hung store in turn.
 *
 * <p>A store that cannot read single records is probed by that trial claim alone, after the same
 * pause. Outcomes and renewals of sends that happened are always tried, whatever the state.
 *
 * <p>Thread-safe.
 */
final class StoreOutages {

  private static final Logger log = LoggerFactory.getLogger(IdempotencyGuard.class);

  /**
   * After a failed probe the next waits this long, then twice as long each time: 50 ms. The first
   * probe runs as soon as the breaker opens, so a store that failed once and answers again (one
   * statement timed out) costs callers only the probe's round trip of refusals.
   */
  static final long FIRST_PROBE_BACKOFF_NANOS = TimeUnit.MILLISECONDS.toNanos(50);

  /** Probes are at most this far apart: a second. */
  static final long MAX_PROBE_NANOS = TimeUnit.SECONDS.toNanos(1);

  /**
   * A trial claim that has not reported back after this long (it was lost on some path) no longer
   * holds the others back: the next claim becomes the trial.
   */
  static final long TRIAL_TIMEOUT_NANOS = TimeUnit.SECONDS.toNanos(30);

  /** A digest no key has: what the probe reads. */
  static final String PROBE_KEY_ID = Digests.keyId("idempotency:store-probe");

  private static final int CLOSED = 0;
  private static final int OPEN = 1;
  private static final int HALF_OPEN = 2;
  private static final int TRIAL = 3;

  private final String storeKind;
  private final KeyStore store;
  private final Clock clock;
  private final Supplier<ScheduledExecutorService> prober;

  private final AtomicInteger state = new AtomicInteger(CLOSED);
  private final AtomicLong failuresSinceLastAnswer = new AtomicLong();
  private final AtomicLong trialStartedNanos = new AtomicLong();
  private final AtomicLong renewalFailuresSinceLastRenewal = new AtomicLong();
  private volatile long nextProbeDelayNanos;
  private volatile boolean probeScheduled;
  private volatile boolean cannotProbe;
  private volatile Throwable lastFailure;

  /**
   * @param store the store, as the guard calls it
   * @param clock the guard's clock, for the probe's read
   * @param prober the guard's probe thread, created on first use
   */
  StoreOutages(KeyStore store, Clock clock, Supplier<ScheduledExecutorService> prober) {
    this.storeKind = store.kind();
    this.store = store;
    this.clock = clock;
    this.prober = prober;
  }

  /** A store operation failed: WARN once per outage, DEBUG afterwards; opens the breaker. */
  void storeFailed(String what, Throwable failure) {
    if (failure instanceof Refused) {
      return;
    }
    lastFailure = failure;
    if (failuresSinceLastAnswer.getAndIncrement() == 0) {
      log.warn(
          "The {} key store is failing: {}: {} (calls are refused at once until it answers again;"
              + " further failures at DEBUG; stack trace at DEBUG)",
          storeKind,
          what,
          describe(failure));
      log.debug("The {} key store failed", storeKind, failure);
    } else if (log.isDebugEnabled()) {
      log.debug("The {} key store failed again: {}", storeKind, what, failure);
    }
    int before = state.getAndSet(OPEN);
    if (before == TRIAL || before == HALF_OPEN) {
      backOff();
    }
    scheduleProbe();
  }

  /**
   * A round of lease renewals failed: WARN once until renewals succeed again, DEBUG afterwards. It
   * does not open the breaker: a failed renewal says nothing of whether a new claim can be made (a
   * partial outage, one shard of a cluster, fails renewals of some keys while claims of others
   * succeed), and a store that is down fails the next claim, which opens it.
   */
  void renewalFailed(String what, Throwable failure) {
    if (renewalFailuresSinceLastRenewal.getAndIncrement() == 0) {
      log.warn(
          "The {} key store is failing to renew leases: {}: {} (renewals are tried again each"
              + " round; further failures at DEBUG; stack trace at DEBUG)",
          storeKind,
          what,
          describe(failure));
      log.debug("The {} key store failed to renew leases", storeKind, failure);
    } else if (log.isDebugEnabled()) {
      log.debug("The {} key store failed to renew leases again: {}", storeKind, what, failure);
    }
  }

  /** A round of lease renewals succeeded: says so once, if rounds had failed. */
  void renewalSucceeded() {
    if (renewalFailuresSinceLastRenewal.get() == 0) {
      return;
    }
    long failed = renewalFailuresSinceLastRenewal.getAndSet(0);
    if (failed > 0) {
      log.info("The {} key store renews leases again, after {} failed rounds", storeKind, failed);
    }
  }

  /**
   * A claim ended with neither an answer nor a failure of the store (its caller's thread was
   * interrupted, or the store threw an {@link Error}): if it was the trial, the next claim becomes
   * the trial at once, instead of every claim being refused until the trial times out.
   */
  void claimAbandoned() {
    state.compareAndSet(TRIAL, HALF_OPEN);
  }

  /**
   * Whether the store is known to fail: the breaker is open and no probe was answered since. Reads
   * the state only; background work that can wait (a claim's take-back) waits while it holds.
   */
  boolean knownFailing() {
    return state.get() == OPEN;
  }

  /** A store operation succeeded: closes the breaker, if it was open. */
  void storeAnswered() {
    if (failuresSinceLastAnswer.get() == 0 && state.get() == CLOSED) {
      return;
    }
    state.set(CLOSED);
    nextProbeDelayNanos = 0;
    long failed = failuresSinceLastAnswer.getAndSet(0);
    if (failed > 0) {
      log.info("The {} key store answers again, after {} failed operations", storeKind, failed);
    }
  }

  /**
   * The failure a new claim gets at once, without asking the store, while the breaker is open;
   * {@code null} when the claim should ask it (the store answers, or this claim is the one trial
   * after a probe was answered).
   */
  KeyStoreException refusal() {
    return refusal("nothing was sent");
  }

  /**
   * A lookup or a deletion of one record ({@code find}, {@code forget}) through the breaker, as a
   * claim goes: refused at once while the store is known to fail ({@link #refusal(String)}), the
   * trial once a probe was answered, and its answer or failure closes or opens the breaker (a
   * record the store holds but cannot be read, {@link UnreadableRecordException}, is an answer:
   * that operation's error, which never refuses other calls). So an operator's lookup, or a health
   * check, during an outage gets its answer at once instead of waiting the store's own bound each
   * time, and never floods a store that comes back.
   *
   * @param what what failed, for the outage's WARN line ({@code "a lookup failed"})
   * @param operation the store call, which throws {@link KeyStoreException} when the store fails
   *     (or {@link UnsupportedOperationException}, which says nothing of the store's health)
   */
  <R> R singleRecord(String what, Supplier<R> operation) {
    KeyStoreException refused = refusal("the store was not asked");
    if (refused != null) {
      throw refused;
    }
    boolean ended = false;
    try {
      R answer = operation.get();
      ended = true;
      storeAnswered();
      return answer;
    } catch (UnreadableRecordException recordLevel) {
      ended = true;
      storeAnswered(); // the store answered: one record is unreadable, the store is available
      throw recordLevel;
    } catch (KeyStoreException failure) {
      if (!Thread.currentThread().isInterrupted()) {
        ended = true;
        storeFailed(what, failure);
      }
      throw failure;
    } finally {
      if (!ended) {
        claimAbandoned(); // no verdict on the store (unsupported, interrupted, an Error)
      }
    }
  }

  /**
   * {@link #refusal()} for an operation whose caller is told {@code consequence} ({@code "nothing
   * was sent"}).
   */
  private KeyStoreException refusal(String consequence) {
    int current = state.get();
    if (current == CLOSED) {
      return null;
    }
    long now = System.nanoTime();
    if (current == HALF_OPEN && state.compareAndSet(HALF_OPEN, TRIAL)) {
      trialStartedNanos.set(now);
      return null;
    }
    long trialStarted = trialStartedNanos.get();
    if (current == TRIAL
        && now - trialStarted > TRIAL_TIMEOUT_NANOS
        && trialStartedNanos.compareAndSet(trialStarted, now)) {
      return null;
    }
    return refused(consequence);
  }

  /**
   * {@link #refusal()} for a claim about to be queued (on the executor of a blocking store), which
   * asks {@link #refusal()} again when it starts: refused at once while the store is known to fail,
   * but never made the trial here, so that no claim holds the trial while it waits in a queue; a
   * half-open breaker lets it queue, and the trial is the first queued claim to start.
   */
  KeyStoreException refusalBeforeQueueing() {
    int current = state.get();
    if (current == CLOSED || current == HALF_OPEN) {
      return null;
    }
    if (current == TRIAL && System.nanoTime() - trialStartedNanos.get() > TRIAL_TIMEOUT_NANOS) {
      return null;
    }
    return refused("nothing was sent");
  }

  private KeyStoreException refused(String consequence) {
    Throwable cause = lastFailure;
    return new Refused(
        "The "
            + storeKind
            + " key store is failing ("
            + failuresSinceLastAnswer.get()
            + " operations in a row); "
            + consequence
            + ". Last failure: "
            + (cause == null ? "unknown" : describe(cause)),
        cause);
  }

  /** Whether the store failed since it last answered. */
  boolean failing() {
    return failuresSinceLastAnswer.get() > 0;
  }

  private synchronized void scheduleProbe() {
    if (probeScheduled) {
      return;
    }
    probeScheduled = true;
    try {
      prober.get().schedule(this::probe, nextProbeDelayNanos, TimeUnit.NANOSECONDS);
    } catch (RejectedExecutionException closing) {
      probeScheduled = false; // the guard is closing: no more probes
    }
  }

  /** One probe, on the guard's probe thread: a read that lets the next claim try if answered. */
  private void probe() {
    synchronized (this) {
      probeScheduled = false;
    }
    if (state.get() != OPEN) {
      return;
    }
    boolean answered = false;
    try {
      if (cannotProbe) {
        answered = true;
      } else {
        try {
          store.find(PROBE_KEY_ID, clock.instant());
          answered = true;
        } catch (UnsupportedOperationException noSingleReads) {
          cannotProbe = true;
          answered = true;
        } catch (RuntimeException stillFailing) {
          lastFailure = stillFailing;
          failuresSinceLastAnswer.incrementAndGet();
          log.debug("The {} key store's probe failed", storeKind, stillFailing);
        }
      }
    } finally {
      // even an Error thrown by the store leaves a next probe: else the breaker would stay open
      if (answered) {
        state.compareAndSet(OPEN, HALF_OPEN);
      } else {
        backOff();
        scheduleProbe();
      }
    }
  }

  /** The next probe waits longer: 50 ms, then twice as long each time, at most a second. */
  private void backOff() {
    long delay = nextProbeDelayNanos;
    nextProbeDelayNanos =
        delay == 0 ? FIRST_PROBE_BACKOFF_NANOS : Math.min(MAX_PROBE_NANOS, delay * 2);
  }

  /** A claim refused without asking the store: not a failure of the store of its own. */
  static final class Refused extends KeyStoreException {
    Refused(String message, Throwable cause) {
      super(message, cause);
    }
  }

  private static String describe(Throwable failure) {
    StringBuilder text = new StringBuilder();
    Throwable t = failure;
    for (int depth = 0; t != null && depth < 4; depth++, t = t.getCause()) {
      if (depth > 0) {
        text.append(" <- ");
      }
      text.append(t.getClass().getSimpleName());
      if (t.getMessage() != null) {
        text.append(": ").append(t.getMessage());
      }
    }
    return text.toString();
  }
}
