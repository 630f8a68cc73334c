package dev.idempotency.spi;

import java.time.Instant;
import java.util.Arrays;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * A snapshot of the record a {@link KeyStore} holds for a key id, as returned by a claim that did
 * not win. The owner token is deliberately absent: only the claimer ever knows it.
 *
 * <p>Times are in the store's time frame: the guard's clock for stores that take time from the
 * request, the server's clock otherwise.
 *
 * @param state the record's state
 * @param attempt 1 for the first claim, incremented by every lease takeover
 * @param fingerprint the fingerprint of the claim that created the record, empty when none
 * @param payload the opaque outcome written by {@link KeyStore#complete}: for {@link
 *     RecordState#COMPLETED} the encoded result, for {@link RecordState#FAILED} the encoded
 *     failure; {@code null} while {@link RecordState#IN_PROGRESS}
 * @param createdAt when the record was first claimed
 * @param completedAt when the outcome was written, or {@code null}
 * @param leaseDeadline until when the current claim is valid
 * @param retentionDeadline from when on the record counts as absent
 */
public record StoredRecord(
    RecordState state,
    int attempt,
    String fingerprint,
    byte @Nullable [] payload,
    Instant createdAt,
    @Nullable Instant completedAt,
    Instant leaseDeadline,
    Instant retentionDeadline) {

  /**
   * Checks the components a store must always provide.
   *
   * @param state see {@link #state()}
   * @param attempt see {@link #attempt()}
   * @param fingerprint see {@link #fingerprint()}
   * @param payload see {@link #payload()}
   * @param createdAt see {@link #createdAt()}
   * @param completedAt see {@link #completedAt()}
   * @param leaseDeadline see {@link #leaseDeadline()}
   * @param retentionDeadline see {@link #retentionDeadline()}
   */
  public StoredRecord {
    Objects.requireNonNull(state, "state");
    Objects.requireNonNull(fingerprint, "fingerprint");
    Objects.requireNonNull(createdAt, "createdAt");
    Objects.requireNonNull(leaseDeadline, "leaseDeadline");
    Objects.requireNonNull(retentionDeadline, "retentionDeadline");
    if (attempt < 1) {
      throw new IllegalArgumentException("attempt must be at least 1, was " + attempt);
    }
  }

  @Override
  public boolean equals(Object other) {
    return other instanceof StoredRecord that
        && state == that.state
        && attempt == that.attempt
        && fingerprint.equals(that.fingerprint)
        && Arrays.equals(payload, that.payload)
        && createdAt.equals(that.createdAt)
        && Objects.equals(completedAt, that.completedAt)
        && leaseDeadline.equals(that.leaseDeadline)
        && retentionDeadline.equals(that.retentionDeadline);
  }

  @Override
  public int hashCode() {
    return Objects.hash(state, attempt, fingerprint, Arrays.hashCode(payload), createdAt);
  }

  @Override
  public String toString() {
    return "StoredRecord[state="
        + state
        + ", attempt="
        + attempt
        + ", payloadBytes="
        + (payload == null ? "none" : payload.length)
        + ", createdAt="
        + createdAt
        + ", completedAt="
        + completedAt
        + ", leaseDeadline="
        + leaseDeadline
        + ", retentionDeadline="
        + retentionDeadline
        + "]";
  }
}
