package dev.idempotency.spi;

import java.time.Instant;
import java.util.Objects;

/**
 * A fenced write of a claim's outcome.
 *
 * @param keyId the record's key id
 * @param ownerToken the token of the claim that sent; the write happens only if the record still
 *     holds it
 * @param state {@link RecordState#COMPLETED} or {@link RecordState#FAILED}
 * @param payload the opaque outcome, stored and returned byte for byte (may be empty, never null)
 * @param now the guard's time, for {@code completedAt}; ignored by stores that use server time
 */
public record CompleteRequest(
    String keyId, String ownerToken, RecordState state, byte[] payload, Instant now) {

  /**
   * Checks every component.
   *
   * @param keyId see {@link #keyId()}
   * @param ownerToken see {@link #ownerToken()}
   * @param state see {@link #state()}
   * @param payload see {@link #payload()}
   * @param now see {@link #now()}
   */
  public CompleteRequest {
    Objects.requireNonNull(keyId, "keyId");
    Objects.requireNonNull(ownerToken, "ownerToken");
    Objects.requireNonNull(state, "state");
    Objects.requireNonNull(payload, "payload");
    Objects.requireNonNull(now, "now");
    if (state == RecordState.IN_PROGRESS) {
      throw new IllegalArgumentException("an outcome must be COMPLETED or FAILED");
    }
  }

  /**
   * Checks the payload against a store's limit; stores call it before writing.
   *
   * @param maxPayloadBytes the store's {@link KeyStore#maxPayloadBytes()}
   * @return this request
   * @throws IllegalArgumentException if the payload is larger
   */
  public CompleteRequest requirePayloadAtMost(int maxPayloadBytes) {
    if (payload.length > maxPayloadBytes) {
      throw new IllegalArgumentException(
          "payload of " + payload.length + " bytes exceeds " + maxPayloadBytes);
    }
    return this;
  }
}
