package dev.idempotency;

/** What the guard does when a key's claim has outlived its lease without recording an outcome. */
public enum TakeoverPolicy {
  /**
   * The default: take the claim over and send again (attempt n+1). If the previous owner crashed
   * after the provider accepted the message, this is the rare duplicate; the stable {@link
   * SendContext#providerKey()} lets a deduplicating provider absorb it.
   */
  TAKE_OVER,
  /**
   * Strict mode: refuse with {@link IdempotencyOutcomeUnknownException}; never send a possible
   * duplicate. The key stays unusable until its window ends.
   */
  REFUSE
}
