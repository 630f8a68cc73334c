package dev.idempotency.spi;

import java.time.Instant;
import java.util.concurrent.CompletionStage;

/**
 * A {@link KeyStore} that can also work without blocking a thread, for {@link
 * dev.idempotency.IdempotencyGuard#executeAsync}. Each method has exactly the semantics of its
 * blocking twin; a store failure completes the stage exceptionally with {@link
 * dev.idempotency.KeyStoreException}.
 *
 * <p>Stores that do not implement it (the JDBC store) are called by the guard on the executor given
 * to {@code IdempotencyGuard.Builder#blockingStoreExecutor}.
 */
public interface AsyncKeyStore extends KeyStore {

  /**
   * Non-blocking {@link #claim}.
   *
   * @param request the claim
   * @return the result
   */
  CompletionStage<ClaimResult> claimAsync(ClaimRequest request);

  /**
   * Non-blocking {@link #complete}.
   *
   * @param request the outcome
   * @return whether it was written
   */
  CompletionStage<Boolean> completeAsync(CompleteRequest request);

  /**
   * Non-blocking {@link #release}.
   *
   * @param keyId the key id
   * @param ownerToken the owner token
   * @return whether it was released
   */
  CompletionStage<Boolean> releaseAsync(String keyId, String ownerToken);

  /**
   * Non-blocking {@link #takeBack}. The default calls {@link #releaseAsync}, matching the default
   * of {@link #takeBack}; a store that overrides {@link #takeBack} overrides this too.
   *
   * @param keyId the key id
   * @param ownerToken the owner token
   * @param now the guard's time; ignored by stores that use server time
   * @return whether the record held the token and was deleted or its lease cut
   */
  default CompletionStage<Boolean> takeBackAsync(String keyId, String ownerToken, Instant now) {
    return releaseAsync(keyId, ownerToken);
  }
}
