package dev.idempotency.spi;

import java.time.Duration;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Deadlines for store operations, for {@link KeyStore} implementations that must fail in bounded
 * time: every watched operation is noted with its deadline in one map, and one daemon thread sweeps
 * the map every {@value #SWEEP_MILLIS} ms and runs the overdue ones' action. It does what a timer
 * task per operation would ({@code CompletableFuture.orTimeout}, JDBC's {@code setQueryTimeout} in
 * PostgreSQL's driver) without waking a timer thread on every call, which on a small machine costs
 * a noticeable part of a round trip (measured in BENCHMARKS.md, run 7).
 *
 * <p>Thread-safe. An action runs at most once, on the sweeping thread, and only if its watch was
 * not {@linkplain Watch#done() done} first; it must be quick (hand blocking work to an executor).
 * The sweeping thread (a daemon) ends once nothing has been watched for {@value #IDLE_MILLIS} ms,
 * so that a program that is done exits promptly, and starts again with the next watch.
 */
public final class OperationDeadlines {

  /** How often overdue operations are looked for: an action runs at most this much late. */
  public static final long SWEEP_MILLIS = 50;

  private static final Logger log = LoggerFactory.getLogger(OperationDeadlines.class);

  /** Every watched operation, with the {@link System#nanoTime} it is due by. */
  private static final Map<Watch, Long> WATCHED = new ConcurrentHashMap<>();

  private static final AtomicBoolean SWEEPING = new AtomicBoolean();

  /** How long the sweeper lives on with nothing to watch: 2 seconds. */
  public static final long IDLE_MILLIS = 2_000;

  /** The sweeps in a row that found nothing watched. */
  private static int idleSweeps;

  private OperationDeadlines() {}

  /** One watched operation. */
  public static final class Watch {

    private final Runnable onOverdue;

    private Watch(Runnable onOverdue) {
      this.onOverdue = onOverdue;
    }

    /** The operation ended: its action will not run. Idempotent. */
    public void done() {
      WATCHED.remove(this);
    }
  }

  /**
   * Watches an operation that starts now.
   *
   * @param timeout how long the operation may take
   * @param onOverdue what to do if it has not been {@linkplain Watch#done() done} by then
   * @return the watch, to mark done when the operation ends, however it ends
   */
  public static Watch watch(Duration timeout, Runnable onOverdue) {
    Objects.requireNonNull(timeout, "timeout must not be null");
    Watch watch = new Watch(Objects.requireNonNull(onOverdue, "onOverdue must not be null"));
    WATCHED.put(watch, System.nanoTime() + timeout.toNanos());
    if (!SWEEPING.get() && SWEEPING.compareAndSet(false, true)) {
      startSweeper();
    }
    return watch;
  }

  private static void startSweeper() {
    ScheduledExecutorService sweeper =
        Executors.newSingleThreadScheduledExecutor(
            task -> {
              Thread thread = new Thread(task, "idempotency-deadlines");
              thread.setDaemon(true);
              return thread;
            });
    idleSweeps = 0;
    sweeper.scheduleWithFixedDelay(
        () -> {
          sweep();
          if (idleLongEnough()) {
            sweeper.shutdown();
          }
        },
        SWEEP_MILLIS,
        SWEEP_MILLIS,
        TimeUnit.MILLISECONDS);
  }

  /**
   * On the sweeping thread: whether it should end, nothing having been watched for {@link
   * #IDLE_MILLIS}. A watch that arrives as it decides finds it still sweeping, so it stays.
   */
  private static boolean idleLongEnough() {
    if (!WATCHED.isEmpty()) {
      idleSweeps = 0;
      return false;
    }
    if (++idleSweeps * SWEEP_MILLIS < IDLE_MILLIS) {
      return false;
    }
    SWEEPING.set(false);
    // a watch() that raced with the check above saw SWEEPING still set: keep sweeping for it
    if (!WATCHED.isEmpty() && SWEEPING.compareAndSet(false, true)) {
      idleSweeps = 0;
      return false;
    }
    return true;
  }

  /**
   * How many operations are watched now.
   *
   * @return the number of watches neither done nor overdue
   */
  public static int watched() {
    return WATCHED.size();
  }

  private static void sweep() {
    long now = System.nanoTime();
    for (Map.Entry<Watch, Long> entry : WATCHED.entrySet()) {
      if (now - entry.getValue() > 0 && WATCHED.remove(entry.getKey(), entry.getValue())) {
        try {
          entry.getKey().onOverdue.run();
        } catch (RuntimeException e) {
          // one failed action must not end the schedule or skip the others
          log.warn("An overdue store operation's action failed", e);
        }
      }
    }
  }
}
