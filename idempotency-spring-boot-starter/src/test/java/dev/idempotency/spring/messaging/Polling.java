package dev.idempotency.spring.messaging;

import java.time.Duration;
import java.util.function.BooleanSupplier;

/** Bounded polling for the messaging tests: generous, since the machine may be busy. */
public final class Polling {

  /** How long a condition may take to hold. */
  public static final Duration TIMEOUT = Duration.ofSeconds(90);

  private Polling() {}

  /**
   * Waits until the condition holds.
   *
   * @throws AssertionError naming {@code what} after {@link #TIMEOUT}
   */
  public static void await(String what, BooleanSupplier condition) throws InterruptedException {
    long deadline = System.nanoTime() + TIMEOUT.toNanos();
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError(
            "timed out after " + TIMEOUT.toSeconds() + " s waiting for " + what);
      }
      Thread.sleep(20);
    }
  }
}
