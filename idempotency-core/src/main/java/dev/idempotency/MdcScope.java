package dev.idempotency;

import org.slf4j.MDC;

/**
 * The MDC entries of a running sender ({@link IdempotencyGuard#MDC_KEY}, {@link
 * IdempotencyGuard#MDC_OPERATION}, {@link IdempotencyGuard#MDC_ATTEMPT}), and what they replaced,
 * restored on close.
 */
final class MdcScope implements AutoCloseable {
  static final MdcScope NONE = new MdcScope(null, null, null);

  private final String previousKey;
  private final String previousOperation;
  private final String previousAttempt;

  private MdcScope(String previousKey, String previousOperation, String previousAttempt) {
    this.previousKey = previousKey;
    this.previousOperation = previousOperation;
    this.previousAttempt = previousAttempt;
  }

  static MdcScope put(String keyId, String operation, int attempt) {
    MdcScope scope =
        new MdcScope(
            MDC.get(IdempotencyGuard.MDC_KEY),
            MDC.get(IdempotencyGuard.MDC_OPERATION),
            MDC.get(IdempotencyGuard.MDC_ATTEMPT));
    MDC.put(IdempotencyGuard.MDC_KEY, keyId);
    MDC.put(IdempotencyGuard.MDC_OPERATION, operation);
    MDC.put(IdempotencyGuard.MDC_ATTEMPT, Integer.toString(attempt));
    return scope;
  }

  @Override
  public void close() {
    if (this == NONE) {
      return;
    }
    restore(IdempotencyGuard.MDC_KEY, previousKey);
    restore(IdempotencyGuard.MDC_OPERATION, previousOperation);
    restore(IdempotencyGuard.MDC_ATTEMPT, previousAttempt);
  }

  private static void restore(String key, String previous) {
    if (previous == null) {
      MDC.remove(key);
    } else {
      MDC.put(key, previous);
    }
  }
}
