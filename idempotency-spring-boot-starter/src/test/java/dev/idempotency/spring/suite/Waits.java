package dev.idempotency.spring.suite;

import java.util.UUID;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.function.Predicate;

/** The suite's bounded waits (generous, for a busy machine) and its keys. */
final class Waits {

  static final long SECONDS = 90;

  private Waits() {}

  /** A key used by no other call: the entry point's name and a random part. */
  static String newKey(Object entry) {
    return entry.toString().toLowerCase() + "-" + UUID.randomUUID();
  }

  /** Waits, polling, until {@code condition} holds; fails naming {@code what} after 90 s. */
  static void await(String what, BooleanSupplier condition) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(SECONDS);
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("timed out after " + SECONDS + " s waiting for " + what);
      }
      Thread.sleep(20);
    }
  }

  /** Calls until the answer is not {@code passing} (or 90 s have passed), and returns it. */
  static Answer callUntil(Callable<Answer> call, Predicate<Answer> passing) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(SECONDS);
    Answer answer = call.call();
    while (passing.test(answer) && System.nanoTime() < deadline) {
      Thread.sleep(50);
      answer = call.call();
    }
    return answer;
  }
}
