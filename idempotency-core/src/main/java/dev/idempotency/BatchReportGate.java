package dev.idempotency;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Orders a {@link Batch}'s reports against its {@link Batch#record()}, so that an outcome is never
 * queued where nothing writes it. A report either enters before {@code record()} closes the gate,
 * and {@code record()} waits for it to leave (bounded) before it writes the queue, or finds the
 * gate closed and is refused. A report that outlasts that wait learns so when it leaves, and then
 * writes what it queued itself.
 *
 * <p>Thread-safe: reports enter from any thread; {@code record()} closes the gate once.
 */
final class BatchReportGate {

  private final AtomicBoolean closed = new AtomicBoolean();
  private final AtomicInteger inside = new AtomicInteger();
  private final Object left = new Object();
  private volatile boolean stoppedWaiting;

  /**
   * Enters the gate; every {@code true} must be followed by one {@link #leave()}.
   *
   * @return {@code false} if {@code record()} closed the gate: the report is refused
   */
  boolean enter() {
    inside.incrementAndGet();
    if (closed.get()) { // read after the increment: close() then sees this report, or it sees close
      leave();
      return false;
    }
    return true;
  }

  /**
   * Leaves the gate.
   *
   * @return whether {@code record()} stopped waiting for this report: the reporter writes its own
   *     queued outcome
   */
  boolean leave() {
    if (inside.decrementAndGet() == 0 && closed.get()) {
      synchronized (left) {
        left.notifyAll();
      }
    }
    return stoppedWaiting;
  }

  /** Whether {@code record()} closed the gate. */
  boolean isClosed() {
    return closed.get();
  }

  /**
   * Closes the gate: no report enters any more.
   *
   * @return {@code false} if it was closed before
   */
  boolean close() {
    return closed.compareAndSet(false, true);
  }

  /**
   * Waits, at most {@code timeoutNanos} and through interrupts (the interrupt is kept), until no
   * report that entered before {@link #close()} is still inside.
   *
   * @return how many reports are still inside when the wait ends: 0 unless it timed out
   */
  int awaitReports(long timeoutNanos) {
    long deadline = System.nanoTime() + timeoutNanos;
    boolean interrupted = false;
    try {
      synchronized (left) {
        int count;
        while ((count = inside.get()) > 0) {
          long remaining = deadline - System.nanoTime();
          if (remaining <= 0) {
            stoppedWaiting = true;
            return count;
          }
          try {
            TimeUnit.NANOSECONDS.timedWait(left, remaining);
          } catch (InterruptedException e) {
            interrupted = true;
          }
        }
        return 0;
      }
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }
}
