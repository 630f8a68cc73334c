package dev.idempotency.spi;

import java.time.Duration;
import java.time.Instant;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * One atomic claim attempt, as the guard asks a {@link KeyStore} for it.
 *
 * @param keyId the record's identity: a fixed-length digest of the caller's key, at most {@link
 *     #MAX_KEY_ID_LENGTH} characters of {@code [A-Za-z0-9_-]}, safe to use as a SQL value or in a
 *     Redis key
 * @param ownerToken a random token unique to this claim; every later write is fenced by it
 * @param fingerprint a digest of the request, or the empty string when the caller gave none; a
 *     store returns it with the record and takes over an expired lease only when it matches
 * @param now the guard's time for this operation; a store that keeps time on its server (see {@link
 *     KeyStore#usesServerTime()}) ignores it
 * @param lease how long the claim stays {@code IN_PROGRESS} before another caller may take it over;
 *     at least 1 ms (stores keep whole milliseconds)
 * @param retention the window: how long the record is kept, counted from the first claim
 * @param takeOverExpiredLease whether an {@code IN_PROGRESS} record whose lease has passed may be
 *     taken over; {@code false} in the guard's strict mode
 * @param debugKey the raw key, only when the user opted into raw keys at rest for debugging;
 *     otherwise {@code null}. A store keeps it beside the record and never uses it as identity.
 */
public record ClaimRequest(
    String keyId,
    String ownerToken,
    String fingerprint,
    Instant now,
    Duration lease,
    Duration retention,
    boolean takeOverExpiredLease,
    @Nullable String debugKey) {

  /** The longest key id a store must accept. */
  public static final int MAX_KEY_ID_LENGTH = 128;

  /** The longest fingerprint a store must accept. */
  public static final int MAX_FINGERPRINT_LENGTH = 64;

  /**
   * Checks every component; a store may rely on these checks.
   *
   * @param keyId see {@link #keyId()}
   * @param ownerToken see {@link #ownerToken()}
   * @param fingerprint see {@link #fingerprint()}
   * @param now see {@link #now()}
   * @param lease see {@link #lease()}
   * @param retention see {@link #retention()}
   * @param takeOverExpiredLease see {@link #takeOverExpiredLease()}
   * @param debugKey see {@link #debugKey()}
   */
  public ClaimRequest {
    Objects.requireNonNull(keyId, "keyId");
    Objects.requireNonNull(ownerToken, "ownerToken");
    Objects.requireNonNull(fingerprint, "fingerprint");
    Objects.requireNonNull(now, "now");
    Objects.requireNonNull(lease, "lease");
    Objects.requireNonNull(retention, "retention");
    if (keyId.isEmpty() || keyId.length() > MAX_KEY_ID_LENGTH) {
      throw new IllegalArgumentException(
          "keyId must be 1 to " + MAX_KEY_ID_LENGTH + " characters, was " + keyId.length());
    }
    if (fingerprint.length() > MAX_FINGERPRINT_LENGTH) {
      throw new IllegalArgumentException(
          "fingerprint must be at most " + MAX_FINGERPRINT_LENGTH + " characters");
    }
    if (lease.toMillis() < 1) {
      throw new IllegalArgumentException("lease must be at least 1 ms, was " + lease);
    }
    if (retention.compareTo(lease) <= 0) {
      throw new IllegalArgumentException(
          "retention (" + retention + ") must be longer than the lease (" + lease + ")");
    }
  }

  /**
   * The same request at another time; used by tests and by stores that re-stamp requests.
   *
   * @param newNow the time of the copy
   * @return a copy at {@code newNow}
   */
  public ClaimRequest withNow(Instant newNow) {
    return new ClaimRequest(
        keyId, ownerToken, fingerprint, newNow, lease, retention, takeOverExpiredLease, debugKey);
  }

  /**
   * The same request with another owner token, as a retry of a claim must use.
   *
   * @param newOwnerToken the token of the copy
   * @return a copy with {@code newOwnerToken}
   */
  public ClaimRequest withOwnerToken(String newOwnerToken) {
    return new ClaimRequest(
        keyId, newOwnerToken, fingerprint, now, lease, retention, takeOverExpiredLease, debugKey);
  }
}
