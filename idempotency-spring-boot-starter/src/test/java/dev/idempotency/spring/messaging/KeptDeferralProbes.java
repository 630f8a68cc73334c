package dev.idempotency.spring.messaging;

import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;

/**
 * What the probes of a kept deferral on each broker share ({@code JmsKeptDeferralAttacksProbeTest},
 * {@code RabbitKeptDeferralAttacksProbeTest}): the per-event counts they keep (deliveries, caught
 * deferrals), the bodies of their unguarded listeners, which call a guarded notifier and catch what
 * it throws while the store is down (retrying the call themselves; making it on an executor and
 * waiting for it), and their bounded waits.
 */
public final class KeptDeferralProbes {

  private KeptDeferralProbes() {}

  /** How often {@code event} was counted in {@code counts}. */
  public static int count(Map<String, AtomicInteger> counts, String event) {
    AtomicInteger count = counts.get(event);
    return count == null ? 0 : count.get();
  }

  /** Counts {@code event} once more in {@code counts}; the count now. */
  public static int add(Map<String, AtomicInteger> counts, String event) {
    return counts.computeIfAbsent(event, e -> new AtomicInteger()).incrementAndGet();
  }

  /** A name no other test uses: {@code what} and a random UUID. */
  public static String unique(String what) {
    return what + "-" + UUID.randomUUID();
  }

  /**
   * A listener's body that retries the deferred call itself until it returns (bounded: 60 s): the
   * store is down for the first call of the event's first delivery only; each failure of the call
   * is caught and counted in {@code caught}.
   *
   * @param send the guarded call
   */
  public static void retryingTheCall(
      String event,
      SwitchableKeyStore store,
      Map<String, AtomicInteger> deliveries,
      Map<String, AtomicInteger> caught,
      Consumer<String> send)
      throws InterruptedException {
    store.down.set(add(deliveries, event) == 1);
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    try {
      while (true) {
        try {
          send.accept(event);
          return;
        } catch (RuntimeException failure) {
          add(caught, event);
          store.down.set(false);
          if (System.nanoTime() > deadline) {
            return;
          }
        }
        Thread.sleep(20);
      }
    } finally {
      store.down.set(false);
    }
  }

  /**
   * A listener's body that makes the call on another thread ({@code pool}), waits for it and
   * catches what it throws, counted in {@code caught}.
   *
   * @param send the guarded call
   */
  public static void callingOnAnotherThread(
      String event,
      ExecutorService pool,
      Map<String, AtomicInteger> deliveries,
      Map<String, AtomicInteger> caught,
      Consumer<String> send) {
    add(deliveries, event);
    try {
      CompletableFuture.runAsync(() -> send.accept(event), pool).join();
    } catch (RuntimeException failure) {
      add(caught, event);
    }
  }

  /** Waits until the condition holds or {@code seconds} passed; whether it held. */
  public static boolean awaitAtMost(int seconds, BooleanSupplier condition)
      throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        return false;
      }
      Thread.sleep(20);
    }
    return true;
  }
}
