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
 *
 * <p>The read goes through the guard's circuit breaker ({@link IdempotencyGuard#find}): while the
 * store is known to fail, the check answers down at once with the last failure's cause, without
 * asking the store, however often it is polled; once the guard's own probe sees the store answer,
 * the next check (or call) is the one trial that closes the breaker, so the check never floods a
 * store that comes back.
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

  /**
   * The failure's root cause ({@code ConnectException: Connection refused}): what went wrong, and
   * never a key or a key's digest, which the messages of the failures around it may name.
   */
  private static String describe(Throwable e) {
    Throwable root = e;
    while (root.getCause() != null && root.getCause() != root) {
      root = root.getCause();
    }
    @Nullable String message = root.getMessage();
    return root.getClass().getSimpleName() + (message == null ? "" : ": " + message);
  }
}
