package dev.idempotency;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What a guard does during a store outage:
 *
 * <ul>
 *   <li>logs one WARN line when the store first fails (its stack trace at DEBUG), DEBUG lines while
 *       it keeps failing, and one INFO line when it answers again, with how many operations failed
 *       meanwhile;
 *   <li>once {@link #FAILURES_BEFORE_FAST_FAIL} operations in a row have failed, refuses new claims
 *       at once, without asking the store ({@link #refusal()}), except one every {@link
 *       #PROBE_INTERVAL_NANOS}, which asks it: so that each caller gets its error at once instead
 *       of waiting out a timeout, and the store is not flooded as it comes back. The first claim
 *       the store answers ends the outage. Outcomes and renewals of sends that happened are always
 *       tried.
 * </ul>
 *
 * Thread-safe.
 */
final class StoreOutages {

  private static final Logger log = LoggerFactory.getLogger(IdempotencyGuard.class);

  private final String storeKind;

  /** How many store operations in a row must fail before claims are refused without asking. */
  static final int FAILURES_BEFORE_FAST_FAIL = 3;

  /** While refusing, one claim in this time still asks the store: 250 ms. */
  static final long PROBE_INTERVAL_NANOS = TimeUnit.MILLISECONDS.toNanos(250);

  private final AtomicLong failuresSinceLastAnswer = new AtomicLong();
  private final AtomicLong lastProbeNanos = new AtomicLong(System.nanoTime());
  private volatile Throwable lastFailure;

  StoreOutages(String storeKind) {
    this.storeKind = storeKind;
  }

  /** A store operation failed: WARN once per outage, DEBUG afterwards. */
  void storeFailed(String what, Throwable failure) {
    if (failure instanceof Refused) {
      return;
    }
    lastFailure = failure;
    if (failuresSinceLastAnswer.getAndIncrement() == 0) {
      log.warn(
          "The {} key store is failing: {}: {} (further failures at DEBUG until it answers"
              + " again; stack trace at DEBUG)",
          storeKind,
          what,
          describe(failure));
      log.debug("The {} key store failed", storeKind, failure);
    } else if (log.isDebugEnabled()) {
      log.debug("The {} key store failed again: {}", storeKind, what, failure);
    }
  }

  /** A store operation succeeded: ends an outage, if there was one. */
  void storeAnswered() {
    if (failuresSinceLastAnswer.get() == 0) {
      return;
    }
    long failed = failuresSinceLastAnswer.getAndSet(0);
    if (failed > 0) {
      log.info("The {} key store answers again, after {} failed operations", storeKind, failed);
    }
  }

  /**
   * During an outage, the failure a new claim gets at once without asking the store; {@code null}
   * when the claim should ask it (no outage, or this claim is the next probe).
   */
  KeyStoreException refusal() {
    if (failuresSinceLastAnswer.get() < FAILURES_BEFORE_FAST_FAIL) {
      return null;
    }
    long now = System.nanoTime();
    long last = lastProbeNanos.get();
    if (now - last >= PROBE_INTERVAL_NANOS && lastProbeNanos.compareAndSet(last, now)) {
      return null;
    }
    Throwable cause = lastFailure;
    return new Refused(
        "The "
            + storeKind
            + " key store is failing ("
            + failuresSinceLastAnswer.get()
            + " operations in a row); nothing was sent. Last failure: "
            + (cause == null ? "unknown" : describe(cause)),
        cause);
  }

  /** A claim refused without asking the store: not a failure of the store of its own. */
  static final class Refused extends KeyStoreException {
    Refused(String message, Throwable cause) {
      super(message, cause);
    }
  }

  /** Whether the store failed since it last answered. */
  boolean failing() {
    return failuresSinceLastAnswer.get() > 0;
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
