package dev.idempotency.inmemory;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import com.github.benmanes.caffeine.cache.RemovalCause;
import com.github.benmanes.caffeine.cache.Ticker;
import dev.idempotency.IdempotencyEvent;
import dev.idempotency.IdempotencyListener;
import dev.idempotency.spi.AsyncKeyStore;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spi.StoredRecord;
import java.time.Duration;
import java.time.Instant;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import java.util.function.UnaryOperator;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A {@link KeyStore} in this JVM's memory, on a bounded Caffeine cache.
 *
 * <pre>{@code
 * KeyStore store = InMemoryKeyStore.builder().maximumSize(500_000).build();
 * }</pre>
 *
 * <p><b>Sizing.</b> A record must stay until its window ends; one evicted earlier for size lets a
 * repeat of its key send again. Size the store for the keys one window holds: {@code maximumSize >=
 * peak sends per second x window in seconds}, with headroom. Every eviction before the window ends
 * is counted ({@link #evictionsBeforeExpiry()}), logged at WARN and reported to the listener as
 * {@link IdempotencyEvent.Type#EVICTED_BEFORE_EXPIRY}.
 *
 * <p><b>Time.</b> Leases and windows follow the time of each request, which is the guard's clock,
 * so a test moves them with {@code IdempotencyGuard.builder().clock(..)}. Records are removed by
 * Caffeine once their window has passed in real time.
 *
 * <p>Thread-safe: each operation is one atomic {@code compute} on the key's entry. Operations never
 * block on I/O, so the async methods complete on the calling thread. Only one JVM sees the records;
 * use the JDBC or Redis store for several instances.
 */
public final class InMemoryKeyStore implements AsyncKeyStore {

  /** The default maximum number of records. */
  public static final long DEFAULT_MAXIMUM_SIZE = 100_000;

  private static final Logger log = LoggerFactory.getLogger(InMemoryKeyStore.class);

  private final Cache<String, InMemoryEntry> cache;
  private final Ticker ticker;
  private final int maxPayloadBytes;
  private final IdempotencyListener listener;
  private final AtomicLong evictionsBeforeExpiry = new AtomicLong();

  private InMemoryKeyStore(Builder builder) {
    this.ticker = builder.ticker;
    this.maxPayloadBytes = builder.maxPayloadBytes;
    this.listener = builder.listener;
    this.cache =
        Caffeine.newBuilder()
            .maximumSize(builder.maximumSize)
            .ticker(ticker)
            .executor(Runnable::run)
            .expireAfter(new InMemoryEntry.UntilRetentionDeadline())
            .evictionListener(this::onEviction)
            .build();
  }

  /**
   * Starts a builder.
   *
   * @return a new builder
   */
  public static Builder builder() {
    return new Builder();
  }

  @Override
  public ClaimResult claim(ClaimRequest request) {
    Objects.requireNonNull(request, "request");
    ClaimResult[] result = new ClaimResult[1];
    Instant now = request.now();
    cache
        .asMap()
        .compute(
            request.keyId(),
            (keyId, current) -> {
              if (current == null || !now.isBefore(current.record.retentionDeadline())) {
                result[0] = new ClaimResult.Claimed(1, false);
                return InMemoryEntry.fresh(request, ticker.read());
              }
              StoredRecord record = current.record;
              boolean leaseExpired =
                  record.state() == RecordState.IN_PROGRESS
                      && !now.isBefore(record.leaseDeadline());
              if (leaseExpired
                  && request.takeOverExpiredLease()
                  && record.fingerprint().equals(request.fingerprint())) {
                result[0] = new ClaimResult.Claimed(record.attempt() + 1, true);
                return current.takenOver(request, ticker.read());
              }
              result[0] = new ClaimResult.Existing(record, leaseExpired);
              return current;
            });
    return result[0];
  }

  @Override
  public boolean complete(CompleteRequest request) {
    Objects.requireNonNull(request, "request");
    request.requirePayloadAtMost(maxPayloadBytes);
    boolean[] written = new boolean[1];
    cache
        .asMap()
        .computeIfPresent(
            request.keyId(),
            (keyId, current) -> {
              if (current.isOwnedBy(request.ownerToken())) {
                written[0] = true;
                return current.completed(request);
              }
              // the owner repeating an outcome it wrote (its reply was lost) succeeds
              written[0] = current.holdsOutcomeOf(request);
              return current;
            });
    return written[0];
  }

  @Override
  public boolean extend(ExtendRequest request) {
    Objects.requireNonNull(request, "request");
    boolean[] extended = new boolean[1];
    Instant now = request.now();
    cache
        .asMap()
        .computeIfPresent(
            request.keyId(),
            (keyId, current) -> {
              // fenced by the owner token alone: an owner whose clock ran past the window still
              // holds its record (nobody claimed it since), and keeps it while it renews
              if (!current.isOwnedBy(request.ownerToken())) {
                return current;
              }
              extended[0] = true;
              return current.withLease(now.plus(request.lease()), ticker.read(), request.lease());
            });
    return extended[0];
  }

  @Override
  public boolean release(String keyId, String ownerToken) {
    return changeOwned(keyId, ownerToken, current -> null);
  }

  /**
   * Deletes a first attempt; cuts a takeover's lease to {@code now}, keeping its attempt, and ends
   * its owner token.
   */
  @Override
  public boolean takeBack(String keyId, String ownerToken, Instant now) {
    Objects.requireNonNull(now, "now");
    return changeOwned(
        keyId, ownerToken, current -> current.record.attempt() == 1 ? null : current.lapsedAt(now));
  }

  /**
   * Replaces the record {@code ownerToken} owns with what {@code change} makes of it (null deletes
   * it), atomically; whether the token owned it.
   */
  private boolean changeOwned(
      String keyId, String ownerToken, UnaryOperator<InMemoryEntry> change) {
    Objects.requireNonNull(keyId, "keyId");
    Objects.requireNonNull(ownerToken, "ownerToken");
    boolean[] owned = new boolean[1];
    cache
        .asMap()
        .computeIfPresent(
            keyId,
            (id, current) -> {
              if (!current.isOwnedBy(ownerToken)) {
                return current;
              }
              owned[0] = true;
              return change.apply(current);
            });
    return owned[0];
  }

  @Override
  public Optional<StoredRecord> find(String keyId, Instant now) {
    Objects.requireNonNull(keyId, "keyId");
    Objects.requireNonNull(now, "now");
    InMemoryEntry entry = cache.getIfPresent(keyId);
    if (entry == null || !now.isBefore(entry.record.retentionDeadline())) {
      return Optional.empty();
    }
    return Optional.of(entry.record);
  }

  @Override
  public boolean delete(String keyId, Instant now) {
    Objects.requireNonNull(keyId, "keyId");
    Objects.requireNonNull(now, "now");
    boolean[] deleted = new boolean[1];
    cache
        .asMap()
        .computeIfPresent(
            keyId,
            (id, current) -> {
              if (current.record.state() == RecordState.IN_PROGRESS
                  || !now.isBefore(current.record.retentionDeadline())) {
                return current;
              }
              deleted[0] = true;
              return null;
            });
    return deleted[0];
  }

  @Override
  public CompletionStage<ClaimResult> claimAsync(ClaimRequest request) {
    return now(() -> claim(request));
  }

  @Override
  public CompletionStage<Boolean> completeAsync(CompleteRequest request) {
    return now(() -> complete(request));
  }

  @Override
  public CompletionStage<Boolean> releaseAsync(String keyId, String ownerToken) {
    return now(() -> release(keyId, ownerToken));
  }

  @Override
  public CompletionStage<Boolean> takeBackAsync(String keyId, String ownerToken, Instant now) {
    return now(() -> takeBack(keyId, ownerToken, now));
  }

  private static <R> CompletionStage<R> now(Supplier<R> operation) {
    try {
      return CompletableFuture.completedFuture(operation.get());
    } catch (RuntimeException e) {
      return CompletableFuture.failedFuture(e);
    }
  }

  @Override
  public int maxPayloadBytes() {
    return maxPayloadBytes;
  }

  /** {@code memory}. */
  @Override
  public String kind() {
    return "memory";
  }

  /**
   * How many records were evicted for size before their window ended. Each one is a key that could
   * be sent again; above zero, raise {@link Builder#maximumSize(long)}.
   *
   * @return the count since this store was built
   */
  public long evictionsBeforeExpiry() {
    return evictionsBeforeExpiry.get();
  }

  /**
   * The number of records held, after pending maintenance (expiry, eviction) has run.
   *
   * @return the number of records
   */
  public long size() {
    cache.cleanUp();
    return cache.estimatedSize();
  }

  private void onEviction(String keyId, InMemoryEntry entry, RemovalCause cause) {
    if (cause != RemovalCause.SIZE) {
      return;
    }
    long count = evictionsBeforeExpiry.incrementAndGet();
    log.warn(
        "Evicted a record for size before its window ended ({} so far): a repeat of that key would"
            + " send again. Raise maximumSize",
        count);
    if (listener != null) {
      try {
        listener.onEvent(
            new IdempotencyEvent(
                IdempotencyEvent.Type.EVICTED_BEFORE_EXPIRY,
                dev.idempotency.IdempotencyKey.DEFAULT_OPERATION,
                keyId,
                entry.record.attempt(),
                Duration.ZERO,
                null));
      } catch (RuntimeException e) {
        log.warn("An IdempotencyListener threw on an eviction event; ignored", e);
      }
    }
  }

  /** Builds an {@link InMemoryKeyStore}. Setters validate at once. Not thread-safe. */
  public static final class Builder {
    private long maximumSize = DEFAULT_MAXIMUM_SIZE;
    private int maxPayloadBytes = KeyStore.DEFAULT_MAX_PAYLOAD_BYTES;
    private IdempotencyListener listener;
    private Ticker ticker = Ticker.systemTicker();

    private Builder() {}

    /**
     * The most records kept. See the class documentation for the sizing rule. Default {@link
     * #DEFAULT_MAXIMUM_SIZE}.
     *
     * @param maximumSize at least 1
     * @return this builder
     */
    public Builder maximumSize(long maximumSize) {
      if (maximumSize < 1) {
        throw new IllegalArgumentException("maximumSize must be at least 1, was " + maximumSize);
      }
      this.maximumSize = maximumSize;
      return this;
    }

    /**
     * The largest stored result, in bytes. Default {@link
     * dev.idempotency.spi.KeyStore#DEFAULT_MAX_PAYLOAD_BYTES}.
     *
     * @param maxPayloadBytes at least 1
     * @return this builder
     */
    public Builder maxPayloadBytes(int maxPayloadBytes) {
      if (maxPayloadBytes < 1) {
        throw new IllegalArgumentException(
            "maxPayloadBytes must be at least 1, was " + maxPayloadBytes);
      }
      this.maxPayloadBytes = maxPayloadBytes;
      return this;
    }

    /**
     * Receives {@link IdempotencyEvent.Type#EVICTED_BEFORE_EXPIRY} events.
     *
     * @param listener the listener
     * @return this builder
     */
    public Builder listener(IdempotencyListener listener) {
      this.listener = Objects.requireNonNull(listener, "listener must not be null");
      return this;
    }

    /**
     * The real-time source for removing records after their window; for tests of removal only.
     * Leases and windows themselves follow the guard's clock. Default {@link
     * Ticker#systemTicker()}.
     *
     * @param ticker the ticker
     * @return this builder
     */
    public Builder ticker(Ticker ticker) {
      this.ticker = Objects.requireNonNull(ticker, "ticker must not be null");
      return this;
    }

    /**
     * Builds the store: an empty Caffeine cache, nothing started (expiry runs as the cache is
     * used).
     *
     * @return the store
     */
    public InMemoryKeyStore build() {
      return new InMemoryKeyStore(this);
    }
  }
}
