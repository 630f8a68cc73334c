package dev.idempotency;

import dev.idempotency.spi.RecordState;
import dev.idempotency.spi.StoredRecord;
import java.time.Instant;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * What the store holds for a key, as {@link IdempotencyGuard#find(String)} reports it to an
 * operator: whether it was sent, when, at which attempt, and until when it is remembered. It
 * carries no result and no owner token. Times are in the store's frame: the guard's clock for a
 * store on request time, the database's or Redis server's otherwise.
 *
 * @param state {@code IN_PROGRESS} (a send is under way, or its process died and its lease has not
 *     run out), {@code COMPLETED} (sent; repeats replay) or {@code FAILED} (a stored permanent
 *     failure)
 * @param attempt 1 for the first claim, plus one for every takeover after a lease ran out
 * @param createdAt when the key was first claimed: the window starts here
 * @param completedAt when the outcome was written, or {@code null} while in progress
 * @param leaseExpiresAt until when the current claim holds (meaningful while in progress)
 * @param expiresAt when the record is forgotten: the end of its window, or of its owner's lease if
 *     that is later
 */
public record IdempotencyRecord(
    RecordState state,
    int attempt,
    Instant createdAt,
    @Nullable Instant completedAt,
    Instant leaseExpiresAt,
    Instant expiresAt) {

  /**
   * Checks the components.
   *
   * @param state see {@link #state()}
   * @param attempt see {@link #attempt()}
   * @param createdAt see {@link #createdAt()}
   * @param completedAt see {@link #completedAt()}
   * @param leaseExpiresAt see {@link #leaseExpiresAt()}
   * @param expiresAt see {@link #expiresAt()}
   */
  public IdempotencyRecord {
    Objects.requireNonNull(state, "state");
    Objects.requireNonNull(createdAt, "createdAt");
    Objects.requireNonNull(leaseExpiresAt, "leaseExpiresAt");
    Objects.requireNonNull(expiresAt, "expiresAt");
  }

  static IdempotencyRecord of(StoredRecord record) {
    return new IdempotencyRecord(
        record.state(),
        record.attempt(),
        record.createdAt(),
        record.completedAt(),
        record.leaseDeadline(),
        record.retentionDeadline());
  }
}
