package dev.idempotency.spring.suite;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The stand-in provider behind every entry point of the suite: it counts each send per key, can
 * hold the sends that start until the test releases them, and can have the application interrupt
 * the thread a send runs on. Like many provider clients, a held send does not stop for an
 * interrupt: it finishes, and leaves the thread's interrupt status set.
 */
public final class SuiteProvider {
  private final Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();
  private final AtomicReference<CountDownLatch> hold = new AtomicReference<>();
  private final AtomicReference<CountDownLatch> entered = new AtomicReference<>();
  private final AtomicBoolean interruptSenders = new AtomicBoolean();
  private final AtomicReference<HeldOnce> holdNext = new AtomicReference<>();

  /**
   * The next send's hold: opened by {@code release}; {@code started} counts it starting, {@code
   * interrupted} the first interrupt of its thread while it is held.
   */
  private record HeldOnce(
      CountDownLatch release, CountDownLatch started, CountDownLatch interrupted) {}

  private final AtomicBoolean interruptAndFailNext = new AtomicBoolean();

  /** Sends for {@code key}: waits while held (at most two minutes), then counts the send. */
  public String send(String key) {
    CountDownLatch in = entered.get();
    if (in != null) {
      in.countDown();
    }
    if (interruptSenders.get()) {
      Thread.currentThread().interrupt(); // the application interrupts the thread mid-send
    }
    if (interruptAndFailNext.compareAndSet(true, false)) {
      Thread.currentThread().interrupt(); // interrupted mid-send, and the send failed: not sent
      throw new IllegalStateException("the provider call was interrupted and failed");
    }
    HeldOnce once = holdNext.getAndSet(null);
    if (once != null) {
      once.started().countDown();
      awaitUninterruptibly(once.release(), once.interrupted());
    }
    CountDownLatch held = hold.get();
    if (held != null) {
      awaitUninterruptibly(held, new CountDownLatch(1));
    }
    int n = sends.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
    return "sent-" + key + "-" + n;
  }

  private static void awaitUninterruptibly(CountDownLatch latch, CountDownLatch interrupts) {
    boolean interrupted = false;
    long deadline = System.nanoTime() + TimeUnit.MINUTES.toNanos(2);
    try {
      while (latch.getCount() > 0) {
        long left = deadline - System.nanoTime();
        if (left <= 0) {
          throw new IllegalStateException("the test never released the provider");
        }
        try {
          latch.await(left, TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
          interrupted = true; // a provider call that does not stop for interrupts
          interrupts.countDown();
        }
      }
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /** Holds the sends that start from now on; the latch returned counts {@code sends} starting. */
  public CountDownLatch hold(CountDownLatch release, int sends) {
    CountDownLatch in = new CountDownLatch(sends);
    entered.set(in);
    hold.set(release);
    return in;
  }

  /**
   * Holds the next send that starts, and only that one, until {@code release} opens; the latch
   * returned counts it starting.
   */
  public CountDownLatch holdNext(CountDownLatch release) {
    return holdNext(release, new CountDownLatch(1));
  }

  /**
   * As {@link #holdNext(CountDownLatch)}; {@code interrupted} counts down at the first interrupt of
   * the held send's thread.
   */
  public CountDownLatch holdNext(CountDownLatch release, CountDownLatch interrupted) {
    CountDownLatch started = new CountDownLatch(1);
    holdNext.set(new HeldOnce(release, started, interrupted));
    return started;
  }

  /** Whether each send from now on has its thread interrupted by the application, mid-send. */
  public void interruptSenders(boolean interrupt) {
    interruptSenders.set(interrupt);
  }

  /** The next send has its thread interrupted and fails (nothing sent); the ones after succeed. */
  public void interruptAndFailNextSend() {
    interruptAndFailNext.set(true);
  }

  /** Stops holding and interrupting sends. */
  public void reset() {
    hold.set(null);
    holdNext.set(null);
    entered.set(null);
    interruptSenders.set(false);
    interruptAndFailNext.set(false);
  }

  /** How often the provider sent for {@code key}. */
  public int sends(String key) {
    AtomicInteger count = sends.get(key);
    return count == null ? 0 : count.get();
  }
}
