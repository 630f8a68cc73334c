package dev.idempotency;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The operation names one guard reports, capped: a namespace that is in fact an id ({@code
 * user-42:welcome}) would otherwise give every user a metrics series of its own. The first {@code
 * max} distinct names are reported as they are, every later one as {@link #OTHER}, with one WARN.
 * Thread-safe.
 */
final class OperationNames {

  /** What an operation beyond the cap is reported as. */
  static final String OTHER = "other";

  private static final Logger log = LoggerFactory.getLogger(IdempotencyGuard.class);

  private final int max;
  private final Set<String> admitted = ConcurrentHashMap.newKeySet();
  private final AtomicBoolean warned = new AtomicBoolean();

  OperationNames(int max) {
    this.max = max;
  }

  /** The name to report for {@code operation}: itself while under the cap, else {@link #OTHER}. */
  String admit(String operation) {
    if (admitted.contains(operation)) {
      return operation;
    }
    synchronized (admitted) {
      if (admitted.contains(operation) || admitted.size() < max) {
        admitted.add(operation);
        return operation;
      }
    }
    if (warned.compareAndSet(false, true)) {
      log.warn(
          "More than {} distinct operation names on one guard; further ones are reported as '{}'."
              + " An operation names a kind of send (otp-sms), not a recipient: name it with"
              + " IdempotencyRequest.withOperation, or give keys a namespace (IdempotencyKey.of)",
          max,
          OTHER);
    }
    return OTHER;
  }
}
