package dev.idempotency.inmemory;

import com.github.benmanes.caffeine.cache.Expiry;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spi.StoredRecord;
import java.time.Duration;
import java.time.Instant;

/**
 * One record of an {@link InMemoryKeyStore} with its owner token and its removal time on the
 * cache's ticker. Immutable: each change is a new entry, swapped in by one atomic {@code compute}.
 */
final class InMemoryEntry {
  final StoredRecord record;
  final String ownerToken;
  final long expiresAtTick;

  private InMemoryEntry(StoredRecord record, String ownerToken, long expiresAtTick) {
    this.record = record;
    this.ownerToken = ownerToken;
    this.expiresAtTick = expiresAtTick;
  }

  static InMemoryEntry fresh(ClaimRequest request, long nowTick) {
    Instant now = request.now();
    StoredRecord record =
        new StoredRecord(
            RecordState.IN_PROGRESS,
            1,
            request.fingerprint(),
            null,
            now,
            null,
            now.plus(request.lease()),
            now.plus(request.retention()));
    return new InMemoryEntry(record, request.ownerToken(), nowTick + request.retention().toNanos());
  }

  boolean isOwnedBy(String token) {
    return record.state() == RecordState.IN_PROGRESS && ownerToken.equals(token);
  }

  /** Whether this record holds exactly the outcome {@code request} writes, by its owner. */
  boolean holdsOutcomeOf(CompleteRequest request) {
    return record.state() == request.state()
        && ownerToken.equals(request.ownerToken())
        && java.util.Arrays.equals(record.payload(), request.payload());
  }

  /** A takeover: a new owner and attempt, with a whole lease (the record lives as long). */
  InMemoryEntry takenOver(ClaimRequest request, long nowTick) {
    Instant leaseDeadline = request.now().plus(request.lease());
    StoredRecord next =
        new StoredRecord(
            RecordState.IN_PROGRESS,
            record.attempt() + 1,
            record.fingerprint(),
            null,
            record.createdAt(),
            null,
            leaseDeadline,
            latest(record.retentionDeadline(), leaseDeadline));
    return new InMemoryEntry(
        next, request.ownerToken(), lastingAtLeast(nowTick, request.lease().toNanos()));
  }

  /**
   * The same claim with a new lease deadline, never before the one it had (a renewal from an
   * earlier time that lands after a newer one leaves the newer lease); the record lives at least as
   * long as the lease, past the window if need be, so it never ends under a live owner.
   */
  InMemoryEntry withLease(Instant leaseDeadline, long nowTick, Duration lease) {
    Instant renewedUntil = latest(record.leaseDeadline(), leaseDeadline);
    StoredRecord next =
        new StoredRecord(
            record.state(),
            record.attempt(),
            record.fingerprint(),
            null,
            record.createdAt(),
            null,
            renewedUntil,
            latest(record.retentionDeadline(), renewedUntil));
    return new InMemoryEntry(next, ownerToken, lastingAtLeast(nowTick, lease.toNanos()));
  }

  /**
   * A take-back: the same attempt with its lease ended at {@code now} (if not before), under a
   * fresh owner token no caller holds, so that no late write of the claim taken back passes the
   * fence again.
   */
  InMemoryEntry lapsedAt(Instant now) {
    StoredRecord next =
        new StoredRecord(
            record.state(),
            record.attempt(),
            record.fingerprint(),
            null,
            record.createdAt(),
            null,
            record.leaseDeadline().isBefore(now) ? record.leaseDeadline() : now,
            record.retentionDeadline());
    return new InMemoryEntry(next, endedOwnerToken(), expiresAtTick);
  }

  /** A random owner token (22 characters, as a claim's), held by no caller. */
  private static String endedOwnerToken() {
    byte[] random = new byte[16];
    java.util.concurrent.ThreadLocalRandom.current().nextBytes(random);
    return java.util.Base64.getUrlEncoder().withoutPadding().encodeToString(random);
  }

  private long lastingAtLeast(long nowTick, long nanos) {
    return Math.max(expiresAtTick, nowTick + nanos);
  }

  private static Instant latest(Instant a, Instant b) {
    return a.isAfter(b) ? a : b;
  }

  InMemoryEntry completed(CompleteRequest request) {
    StoredRecord next =
        new StoredRecord(
            request.state(),
            record.attempt(),
            record.fingerprint(),
            request.payload().clone(),
            record.createdAt(),
            request.now(),
            record.leaseDeadline(),
            record.retentionDeadline());
    return new InMemoryEntry(next, ownerToken, expiresAtTick);
  }

  /** Removes a record when its window has passed on the cache's ticker. */
  static final class UntilRetentionDeadline implements Expiry<String, InMemoryEntry> {
    @Override
    public long expireAfterCreate(String key, InMemoryEntry entry, long currentTime) {
      return Math.max(0, entry.expiresAtTick - currentTime);
    }

    @Override
    public long expireAfterUpdate(
        String key, InMemoryEntry entry, long currentTime, long currentDuration) {
      return Math.max(0, entry.expiresAtTick - currentTime);
    }

    @Override
    public long expireAfterRead(
        String key, InMemoryEntry entry, long currentTime, long currentDuration) {
      return currentDuration;
    }
  }
}
