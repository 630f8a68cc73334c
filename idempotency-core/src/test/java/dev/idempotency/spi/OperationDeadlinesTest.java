package dev.idempotency.spi;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.testservers.Poll;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

class OperationDeadlinesTest {

  @Test
  void anOverdueOperationsActionRunsOnceAndADoneOnesNever() throws Exception {
    CountDownLatch overdue = new CountDownLatch(1);
    AtomicInteger overdueRuns = new AtomicInteger();
    AtomicInteger doneRuns = new AtomicInteger();

    OperationDeadlines.Watch late =
        OperationDeadlines.watch(
            Duration.ofMillis(1),
            () -> {
              overdueRuns.incrementAndGet();
              overdue.countDown();
            });
    OperationDeadlines.Watch ended =
        OperationDeadlines.watch(Duration.ofMillis(1), doneRuns::incrementAndGet);
    ended.done();

    assertThat(overdue.await(10, TimeUnit.SECONDS)).as("the overdue action ran").isTrue();
    // sweeps after that run neither it again nor the one marked done
    CountDownLatch laterSweep = new CountDownLatch(1);
    OperationDeadlines.watch(Duration.ofMillis(1), laterSweep::countDown);
    assertThat(laterSweep.await(10, TimeUnit.SECONDS)).isTrue();
    late.done();
    assertThat(overdueRuns).hasValue(1);
    assertThat(doneRuns).hasValue(0);
  }

  @Test
  void aFailingActionDoesNotStopTheSweeps() throws Exception {
    OperationDeadlines.watch(
        Duration.ofMillis(1),
        () -> {
          throw new IllegalStateException("failing on purpose");
        });
    CountDownLatch after = new CountDownLatch(1);
    OperationDeadlines.watch(Duration.ofMillis(20), after::countDown);

    assertThat(after.await(10, TimeUnit.SECONDS)).isTrue();
  }

  @Test
  void nullsAreRefused() {
    assertThatThrownBy(() -> OperationDeadlines.watch(null, () -> {}))
        .isInstanceOf(NullPointerException.class)
        .hasMessageContaining("timeout");
    assertThatThrownBy(() -> OperationDeadlines.watch(Duration.ofSeconds(1), null))
        .isInstanceOf(NullPointerException.class)
        .hasMessageContaining("onOverdue");
  }

  /** A program that is done exits promptly: the sweeper ends when idle, and comes back. */
  @Test
  void theSweeperEndsWhenNothingIsWatchedAndStartsAgainWithTheNextWatch() throws Exception {
    OperationDeadlines.watch(Duration.ofSeconds(60), () -> {}).done();

    Poll.within(Duration.ofSeconds(30))
        .every(Duration.ofMillis(50))
        .until("the idle sweeper to end", () -> !sweeperAlive());
    CountDownLatch overdue = new CountDownLatch(1);
    OperationDeadlines.watch(Duration.ofMillis(1), overdue::countDown);

    assertThat(overdue.await(10, TimeUnit.SECONDS)).as("a new sweeper ran it").isTrue();
  }

  private static boolean sweeperAlive() {
    return Thread.getAllStackTraces().keySet().stream()
        .anyMatch(thread -> thread.isAlive() && thread.getName().equals("idempotency-deadlines"));
  }
}
