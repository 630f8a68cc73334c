package dev.idempotency.spi;

import java.time.Duration;
import java.time.Instant;
import java.util.Objects;

/**
 * A fenced renewal of a claim's lease, as the guard sends it while a sender runs (or while a batch
 * still has keys to send).
 *
 * @param keyId the record's key id
 * @param ownerToken the token of the claim being renewed; the lease moves only if the record still
 *     holds it
 * @param lease the new lease, counted from now; the store keeps the record at least that long, past
 *     its window if need be
 * @param now the guard's time for this operation; ignored by stores that use server time
 */
public record ExtendRequest(String keyId, String ownerToken, Duration lease, Instant now) {

  /**
   * Checks every component.
   *
   * @param keyId see {@link #keyId()}
   * @param ownerToken see {@link #ownerToken()}
   * @param lease see {@link #lease()}
   * @param now see {@link #now()}
   */
  public ExtendRequest {
    Objects.requireNonNull(keyId, "keyId");
    Objects.requireNonNull(ownerToken, "ownerToken");
    Objects.requireNonNull(lease, "lease");
    Objects.requireNonNull(now, "now");
    if (lease.toMillis() < 1) {
      throw new IllegalArgumentException("lease must be at least 1 ms, was " + lease);
    }
  }
}
