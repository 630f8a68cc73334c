package dev.idempotency;

import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * How a guard logs a store outage: one WARN line when the store first fails (its stack trace at
 * DEBUG), DEBUG lines while it keeps failing, and one INFO line when it answers again, with how
 * many operations failed meanwhile. Each caller still gets its error at once; only the log is
 * quiet. Thread-safe.
 */
final class StoreOutages {

  private static final Logger log = LoggerFactory.getLogger(IdempotencyGuard.class);

  private final String storeKind;
  private final AtomicLong failuresSinceLastAnswer = new AtomicLong();

  StoreOutages(String storeKind) {
    this.storeKind = storeKind;
  }

  /** A store operation failed: WARN once per outage, DEBUG afterwards. */
  void storeFailed(String what, Throwable failure) {
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
