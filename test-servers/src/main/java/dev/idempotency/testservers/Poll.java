package dev.idempotency.testservers;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;

/**
 * Bounded polling for tests: asks a probe again and again, a short pause apart, until its answer is
 * the one awaited or the time is up; then fails with what was awaited, the last answer and the last
 * tolerated failure. A test waits with this for something that happens in the background, instead
 * of sleeping for a time that assumes the machine is fast.
 *
 * <pre>{@code
 * Optional<IdempotencyRecord> record =
 *     Poll.within(Duration.ofSeconds(20))
 *         .ignoring(KeyStoreException.class)
 *         .until("the claim taken back", () -> guard.find(key), Optional::isEmpty);
 * }</pre>
 *
 * <p>Not thread-safe; make one per wait.
 */
public final class Poll {

  /** What the test asks each round; it may throw a tolerated exception while waiting. */
  @FunctionalInterface
  public interface Probe<T> {
    T get() throws Exception;
  }

  /** A condition asked each round; it may throw a tolerated exception while waiting. */
  @FunctionalInterface
  public interface Condition {
    boolean holds() throws Exception;
  }

  private final Duration timeout;
  private Duration interval = Duration.ofMillis(20);
  private final List<Class<? extends Throwable>> tolerated = new ArrayList<>();

  private Poll(Duration timeout) {
    this.timeout = Objects.requireNonNull(timeout, "timeout");
    if (timeout.isNegative()) {
      throw new IllegalArgumentException("timeout must not be negative: " + timeout);
    }
  }

  /** Polls for {@code timeout} at most: generous, as it only bounds a wait that should end. */
  public static Poll within(Duration timeout) {
    return new Poll(timeout);
  }

  /** The pause between two rounds (20 ms unless set). */
  public Poll every(Duration interval) {
    Objects.requireNonNull(interval, "interval");
    if (interval.isNegative() || interval.isZero()) {
      throw new IllegalArgumentException("interval must be positive: " + interval);
    }
    this.interval = interval;
    return this;
  }

  /** A failure of the probe of this type means "not yet": the probe is asked again. */
  public Poll ignoring(Class<? extends Throwable> type) {
    tolerated.add(Objects.requireNonNull(type, "type"));
    return this;
  }

  /**
   * Asks {@code probe} until its answer passes {@code done}.
   *
   * @return the first answer that passed
   * @throws AssertionError when the time is up, naming {@code what}, the last answer and, as its
   *     cause, the last tolerated failure
   */
  public <T> T until(String what, Probe<T> probe, Predicate<? super T> done)
      throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    boolean answered = false;
    T last = null;
    Throwable lastFailure = null;
    while (true) {
      try {
        T answer = probe.get();
        answered = true;
        last = answer;
        if (done.test(answer)) {
          return answer;
        }
      } catch (Throwable failure) {
        if (!isTolerated(failure)) {
          throwUnchecked(failure);
        }
        lastFailure = failure;
      }
      if (System.nanoTime() - deadline >= 0) {
        throw new AssertionError(
            "timed out after "
                + timeout.toMillis()
                + " ms waiting for "
                + what
                + (answered ? "; last answer: " + last : "; no answer")
                + (lastFailure == null ? "" : "; last failure: " + lastFailure),
            lastFailure);
      }
      TimeUnit.NANOSECONDS.sleep(interval.toNanos()); // a polling pause, bounded above
    }
  }

  /** Asks {@code condition} until it holds; fails as {@link #until(String, Probe, Predicate)}. */
  public void until(String what, Condition condition) throws InterruptedException {
    until(what, condition::holds, Boolean::booleanValue);
  }

  private boolean isTolerated(Throwable failure) {
    for (Class<? extends Throwable> type : tolerated) {
      if (type.isInstance(failure)) {
        return true;
      }
    }
    return false;
  }

  @SuppressWarnings("unchecked")
  private static <E extends Throwable> void throwUnchecked(Throwable failure) throws E {
    throw (E) failure;
  }
}
