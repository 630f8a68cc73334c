package dev.idempotency.spi;

import java.util.Objects;

/**
 * What an atomic {@link KeyStore#claim claim} found: either the caller now owns the key, or the
 * record that stopped it. Contention is a value, not an exception. In a batch ({@link
 * KeyStore#claimAll}) a key whose claim failed is reported as {@link Failed}, so that one failure
 * never hides the others; a single {@link KeyStore#claim} throws instead.
 */
public sealed interface ClaimResult
    permits ClaimResult.Claimed, ClaimResult.Existing, ClaimResult.Failed {

  /**
   * The caller owns the key: the store wrote an {@link RecordState#IN_PROGRESS} record holding the
   * request's owner token.
   *
   * @param attempt 1 for a fresh claim, the previous attempt plus one for a lease takeover
   * @param takeover whether this claim took over an expired lease of another owner
   */
  record Claimed(int attempt, boolean takeover) implements ClaimResult {
    /**
     * Checks the attempt number.
     *
     * @param attempt see {@link #attempt()}
     * @param takeover see {@link #takeover()}
     */
    public Claimed {
      if (attempt < 1) {
        throw new IllegalArgumentException("attempt must be at least 1, was " + attempt);
      }
    }
  }

  /**
   * The store holds a live record the caller may not claim.
   *
   * @param record the record as it is
   * @param leaseExpired whether the record is {@link RecordState#IN_PROGRESS} with a lease that has
   *     passed by the store's time (it was not taken over: strict mode, or a different fingerprint)
   */
  record Existing(StoredRecord record, boolean leaseExpired) implements ClaimResult {
    /**
     * Checks the record is present.
     *
     * @param record see {@link #record()}
     * @param leaseExpired see {@link #leaseExpired()}
     */
    public Existing {
      Objects.requireNonNull(record, "record");
    }
  }

  /**
   * In a batch only: the store failed to claim this key. Nothing is owned; nothing may be sent.
   *
   * @param error what failed
   */
  record Failed(dev.idempotency.KeyStoreException error) implements ClaimResult {
    /**
     * Checks the error is present.
     *
     * @param error see {@link #error()}
     */
    public Failed {
      Objects.requireNonNull(error, "error");
    }
  }
}
