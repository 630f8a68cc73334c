package dev.idempotency.spring.actuate;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.spi.KeyStore;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * What the health contributors report, on either Spring Boot line: the store's kind, and whether it
 * answered a read of one key (a key no call uses, so the check changes nothing). A store that
 * cannot read single records is reported as unknown.
 */
public final class StoreHealth {

  /** The key the check reads; never written. */
  static final String PROBE_KEY = "idempotency-health:probe";

  /** The outcome of one check. */
  public enum Status {
    /** The store answered. */
    UP,
    /** The store failed or could not be reached. */
    DOWN,
    /** The store cannot read single records, so the check cannot tell. */
    UNKNOWN
  }

  private final IdempotencyGuard guard;
  private final KeyStore store;

  /**
   * Creates the check.
   *
   * @param guard the guard whose store is checked
   * @param store the same store, for its kind
   */
  public StoreHealth(IdempotencyGuard guard, KeyStore store) {
    this.guard = Objects.requireNonNull(guard, "guard must not be null");
    this.store = Objects.requireNonNull(store, "store must not be null");
  }

  /**
   * Checks the store once.
   *
   * @param details filled with {@code store} (its kind) and, when it failed, {@code error}
   * @return the outcome
   */
  public Status check(Map<String, Object> details) {
    details.put("store", store.kind());
    try {
      guard.find(PROBE_KEY);
      return Status.UP;
    } catch (UnsupportedOperationException e) {
      details.put("check", "this store cannot read single records");
      return Status.UNKNOWN;
    } catch (RuntimeException e) {
      details.put("error", describe(e));
      return Status.DOWN;
    }
  }

  /**
   * The check's details as a fresh map.
   *
   * @return an ordered map
   */
  static Map<String, Object> newDetails() {
    return new LinkedHashMap<>();
  }

  private static String describe(Throwable e) {
    Throwable root = e;
    while (root.getCause() != null && root.getCause() != root) {
      root = root.getCause();
    }
    @Nullable String message = e.getMessage();
    if (root == e) {
      return e.getClass().getSimpleName() + (message == null ? "" : ": " + message);
    }
    return (message == null ? e.getClass().getSimpleName() : message)
        + " ("
        + root.getClass().getSimpleName()
        + (root.getMessage() == null ? "" : ": " + root.getMessage())
        + ")";
  }
}
