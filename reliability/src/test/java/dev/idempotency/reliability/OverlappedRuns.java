package dev.idempotency.reliability;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.IntStream;
import java.util.stream.Stream;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.function.Executable;

/**
 * Independent runs of one test, on different stores, that spend most of their time waiting (on
 * leases, slow sends, child JVMs, servers starting): all are started at once, on at most a given
 * number of threads, and each is reported as its own dynamic test, which waits (bounded) for its
 * run and fails with the run's own failure. The threads are daemons: a run left behind by a failed
 * test cannot keep the JVM alive.
 */
final class OverlappedRuns {

  /** One run: its test's name, and its work with its assertions; no work if it is not selected. */
  record Run(String name, Executable work, String notSelectedBecause) {
    static Run of(String name, Executable work) {
      return new Run(name, work, null);
    }

    static Run skipped(String name, String because) {
      return new Run(name, null, because);
    }
  }

  private OverlappedRuns() {}

  /**
   * Starts the runs in the order given, {@code threads} at a time, and returns one test per run.
   *
   * @param limit how long a test waits for its run, at most, counted from when it starts waiting
   */
  static Stream<DynamicTest> start(int threads, Duration limit, List<Run> runs) {
    ExecutorService executor =
        Executors.newFixedThreadPool(
            threads,
            task -> {
              Thread thread = new Thread(task, "overlapped-run");
              thread.setDaemon(true);
              return thread;
            });
    List<Future<Void>> started = new ArrayList<>();
    for (Run run : runs) {
      started.add(
          run.work() == null
              ? null
              : executor.submit(
                  () -> {
                    try {
                      run.work().execute();
                    } catch (Exception | Error e) {
                      throw e;
                    } catch (Throwable other) {
                      throw new IllegalStateException(other);
                    }
                    return null;
                  }));
    }
    executor.shutdown();
    return IntStream.range(0, runs.size())
        .mapToObj(
            i ->
                DynamicTest.dynamicTest(
                    runs.get(i).name(),
                    () -> {
                      Assumptions.assumeTrue(
                          started.get(i) != null, runs.get(i).notSelectedBecause());
                      try {
                        started.get(i).get(limit.toMillis(), TimeUnit.MILLISECONDS);
                      } catch (ExecutionException e) {
                        throw e.getCause();
                      }
                    }));
  }
}
