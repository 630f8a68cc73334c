package dev.idempotency;

import java.util.Optional;

/**
 * An operator's look at one record, {@link IdempotencyGuard#find} and {@link
 * IdempotencyGuard#forget}: through the guard's breaker ({@link StoreOutages#singleRecord}), a
 * store's unexpected failure wrapped in a {@link KeyStoreException}.
 */
final class RecordLookups {

  private RecordLookups() {}

  /** What the store holds for {@code keyId}, unchanged. */
  static Optional<IdempotencyRecord> find(GuardSettings settings, String keyId) {
    return settings.outages.singleRecord(
        "a lookup failed",
        () -> {
          try {
            return settings.store.find(keyId, settings.clock.instant()).map(IdempotencyRecord::of);
          } catch (KeyStoreException | UnsupportedOperationException e) {
            throw e;
          } catch (RuntimeException e) {
            throw new KeyStoreException("The key store failed to read a key", e);
          }
        });
  }

  /**
   * Deletes the completed or failed record of {@code keyId}, and drops it from the near cache.
   *
   * @return whether a record was deleted
   */
  static boolean forget(GuardSettings settings, String keyId) {
    boolean deleted =
        settings.outages.singleRecord(
            "a deletion failed",
            () -> {
              try {
                return settings.store.delete(keyId, settings.clock.instant());
              } catch (KeyStoreException | UnsupportedOperationException e) {
                throw e;
              } catch (RuntimeException e) {
                throw new KeyStoreException("The key store failed to forget a key", e);
              }
            });
    if (settings.nearCache != null) {
      settings.nearCache.remove(keyId);
    }
    if (deleted) {
      CallEvents.log.info("Forgot key {}: its next call sends again", keyId);
    }
    return deleted;
  }
}
