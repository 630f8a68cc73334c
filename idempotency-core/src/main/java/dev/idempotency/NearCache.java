package dev.idempotency;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import com.github.benmanes.caffeine.cache.Expiry;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spi.StoredRecord;
import java.time.Duration;
import java.time.Instant;
import java.util.Objects;

/**
 * An opt-in cache, in this JVM, of completed records the guard has read from its store: a retry
 * storm or a redelivery to the same consumer replays from memory instead of asking the store for a
 * record that cannot change until its window ends. Enable it with {@link
 * IdempotencyGuard.Builder#nearCache(NearCache)}:
 *
 * <pre>{@code
 * IdempotencyGuard.builder()
 *     .store(store)
 *     .nearCache(NearCache.of(100_000, Duration.ofSeconds(30)))
 *     .build();
 * }</pre>
 *
 * <p>What it promises:
 *
 * <ul>
 *   <li>It holds only completed records, as the store answered them to a repeat (never a record in
 *       progress, never a stored failure), and never a first send's own result.
 *   <li>It never answers past a record's window: an entry lives at most {@code maximumAge}, and is
 *       dropped once its record's window end, as the store reported it, is near. On a store that
 *       keeps time on its server (Redis, JDBC with database time) the guard's clock stands in for
 *       the server's, so records whose window ends within two maximum ages are not cached at all.
 *   <li>It checks the fingerprint: a repeat with another fingerprint goes to the store, which
 *       refuses it ({@link IdempotencyKeyReuseException}).
 *   <li>{@link IdempotencyGuard#forget} on this instance removes the entry. A {@code forget} on
 *       another instance reaches this one's cache only when the entry ends: for at most {@code
 *       maximumAge} this instance may still replay the forgotten result. Choose the age with that
 *       in mind.
 * </ul>
 *
 * <p>Bounded by {@code maximumSize} entries (Caffeine's size eviction). Immutable; the cache itself
 * is thread-safe.
 */
public final class NearCache {

  private final long maximumSize;
  private final Duration maximumAge;

  private NearCache(long maximumSize, Duration maximumAge) {
    this.maximumSize = maximumSize;
    this.maximumAge = maximumAge;
  }

  /**
   * A near cache of at most {@code maximumSize} records, each kept at most {@code maximumAge}.
   *
   * @param maximumSize at least 1
   * @param maximumAge positive; also how long a {@code forget} on another instance may go unseen
   *     here
   * @return the settings
   */
  public static NearCache of(long maximumSize, Duration maximumAge) {
    Objects.requireNonNull(maximumAge, "maximumAge must not be null");
    if (maximumSize < 1) {
      throw new IllegalArgumentException("maximumSize must be at least 1, was " + maximumSize);
    }
    if (maximumAge.isNegative() || maximumAge.isZero()) {
      throw new IllegalArgumentException("maximumAge must be positive, was " + maximumAge);
    }
    return new NearCache(maximumSize, maximumAge);
  }

  /**
   * The most records held.
   *
   * @return the size bound
   */
  public long maximumSize() {
    return maximumSize;
  }

  /**
   * The longest an entry lives.
   *
   * @return the age bound
   */
  public Duration maximumAge() {
    return maximumAge;
  }

  /** One completed record in memory: what a replay needs, and when it must be dropped. */
  record Entry(String fingerprint, byte[] payload, int attempt, long expiresAtNanos) {}

  /** The cache of one guard. */
  static final class Records {
    private final Cache<String, Entry> cache;
    private final long maximumAgeNanos;
    private final boolean serverTime;

    Records(NearCache settings, boolean serverTime) {
      this.maximumAgeNanos = settings.maximumAge.toNanos();
      this.serverTime = serverTime;
      this.cache =
          Caffeine.newBuilder()
              .maximumSize(settings.maximumSize)
              .executor(Runnable::run)
              .expireAfter(
                  new Expiry<String, Entry>() {
                    @Override
                    public long expireAfterCreate(String key, Entry entry, long now) {
                      return Math.max(0, entry.expiresAtNanos() - System.nanoTime());
                    }

                    @Override
                    public long expireAfterUpdate(
                        String key, Entry entry, long now, long currentDuration) {
                      return Math.max(0, entry.expiresAtNanos() - System.nanoTime());
                    }

                    @Override
                    public long expireAfterRead(
                        String key, Entry entry, long now, long currentDuration) {
                      return currentDuration;
                    }
                  })
              .build();
    }

    /** The entry for a key id, if it is held and not due. */
    Entry get(String keyId) {
      Entry entry = cache.getIfPresent(keyId);
      if (entry != null && System.nanoTime() - entry.expiresAtNanos() >= 0) {
        cache.asMap().remove(keyId, entry);
        return null;
      }
      return entry;
    }

    /**
     * Keeps a completed record the store answered, read at {@code now} by the guard's clock, unless
     * its window ends too soon to keep it safely.
     */
    void put(String keyId, StoredRecord record, Instant now) {
      if (record.state() != RecordState.COMPLETED || record.payload() == null) {
        return;
      }
      Instant storeNow = now;
      if (record.completedAt() != null && record.completedAt().isAfter(storeNow)) {
        storeNow = record.completedAt(); // the store's clock is at least there
      }
      long untilWindowEnd = Duration.between(storeNow, record.retentionDeadline()).toNanos();
      long margin = serverTime ? maximumAgeNanos : 0;
      long keep = Math.min(maximumAgeNanos, untilWindowEnd - margin);
      if (keep <= 0) {
        return;
      }
      cache.put(
          keyId,
          new Entry(
              record.fingerprint(), record.payload(), record.attempt(), System.nanoTime() + keep));
    }

    void remove(String keyId) {
      cache.invalidate(keyId);
    }

    long size() {
      cache.cleanUp();
      return cache.estimatedSize();
    }
  }
}
