package dev.idempotency.tck;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.KeyStoreException;
import java.time.Duration;

/** For tests of a store that comes back: calls the guard until the store answers, bounded. */
public final class StoreRecovery {

  private StoreRecovery() {}

  /**
   * Executes {@code key} with a sender returning {@code "sent"} until the store stops failing,
   * pausing 100 ms between tries.
   *
   * @param guard the guard on the store that is coming back
   * @param key the key
   * @param ttl the window
   * @param limit how long to keep trying
   * @return what the call returned once the store answered
   * @throws AssertionError if the store still failed after {@code limit}
   * @throws InterruptedException if interrupted while pausing
   */
  public static String sendOnceTheStoreAnswers(
      IdempotencyGuard guard, String key, Duration ttl, Duration limit)
      throws InterruptedException {
    long deadline = System.nanoTime() + limit.toNanos();
    while (true) {
      try {
        return guard.execute(key, ttl, ctx -> "sent");
      } catch (KeyStoreException notYet) {
        if (System.nanoTime() > deadline) {
          throw new AssertionError("the store did not recover within " + limit, notYet);
        }
        Thread.sleep(100);
      }
    }
  }
}
