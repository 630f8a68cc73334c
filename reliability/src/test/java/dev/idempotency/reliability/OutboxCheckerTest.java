package dev.idempotency.reliability;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.reliability.FaultHistory.Call;
import dev.idempotency.reliability.FaultHistory.Fault;
import dev.idempotency.reliability.FaultHistory.Send;
import dev.idempotency.reliability.OutboxTable.Row;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class OutboxCheckerTest {

  private static FaultHistory history(List<Send> enqueues, List<Call> calls, List<Fault> faults) {
    FaultHistory history = new FaultHistory();
    history.sends.addAll(enqueues);
    history.calls.addAll(calls);
    history.faults.addAll(faults);
    return history;
  }

  private static Send enqueue(String key, int process, long millis, String id) {
    return new Send(key, "pk-" + key, 1, process, millis, millis, id);
  }

  private static Call call(String key, int process, String outcome, String value, long millis) {
    return new Call(key, "joined", process, outcome, value, outcome.equals("SENT"), millis);
  }

  /**
   * A key enqueued once and replayed, another whose first enqueue was killed inside its transaction
   * (rolled back: no row, no call logged) and enqueued again, a commit that threw but had happened,
   * and an application rollback that left nothing: all as joined mode promises.
   */
  @Test
  void oneRowPerKeyWhoseIdEveryCallerGotPassesKillsIncluded() {
    FaultHistory history =
        history(
            List.of(
                enqueue("a", 0, 100, "o-0-1"),
                enqueue("b", 1, 150, "o-1-1"),
                enqueue("b", 2, 900, "o-2-1"),
                enqueue("c", 2, 1_000, "o-2-2"),
                enqueue("d", 0, 1_100, "o-0-2")),
            List.of(
                call("a", 0, "SENT", "o-0-1", 200),
                call("a", 2, "REPLAYED", "o-0-1", 300),
                call("a", 2, "REPLAYED_ROLLED_BACK", "o-0-1", 310),
                call("b", 2, "SENT", "o-2-1", 950),
                call("b", 0, "REPLAYED", "o-2-1", 960),
                call("c", 2, "SENT_COMMIT_FAILED", "o-2-2", 1_050),
                call("c", 0, "REPLAYED", "o-2-2", 1_200),
                call("d", 0, "SENT_ROLLED_BACK", "o-0-2", 1_150)),
            List.of(new Fault("KILL", 1, 500, 500)));

    DuplicateChecker.Report report =
        OutboxChecker.check(
            history,
            List.of(new Row("a", "o-0-1"), new Row("b", "o-2-1"), new Row("c", "o-2-2")),
            Map.of("a", "o-0-1", "b", "o-2-1", "c", "o-2-2"),
            List.of());

    assertThat(report.ok()).as(report.toString()).isTrue();
    assertThat(report.sends).isEqualTo(3);
    assertThat(report.firstSends).isEqualTo(2);
    assertThat(report.replays).isEqualTo(3);
    assertThat(report.killedInFlight).isEqualTo(1);
    assertThat(report.allowedDuplicates).isEmpty();
  }

  /**
   * The broken variant's history (the outbox row committed apart from the key's record): the first
   * process enqueued and was killed before its transaction committed, its row stayed, and the retry
   * enqueued the key again. A kill excuses no duplicate here.
   */
  @Test
  void aSecondRowOfAKeyFailsTheRunEvenAfterAKill() {
    FaultHistory history =
        history(
            List.of(enqueue("k", 0, 100, "o-0-1"), enqueue("k", 1, 900, "o-1-1")),
            List.of(call("k", 1, "SENT", "o-1-1", 950), call("k", 2, "REPLAYED", "o-1-1", 990)),
            List.of(new Fault("KILL", 0, 120, 120)));

    DuplicateChecker.Report report =
        OutboxChecker.check(
            history,
            List.of(new Row("k", "o-0-1"), new Row("k", "o-1-1")),
            Map.of("k", "o-1-1"),
            List.of());

    assertThat(report.ok()).isFalse();
    assertThat(report.brokenDuplicates)
        .singleElement()
        .asString()
        .startsWith("k: 2 outbox rows")
        .contains("o-0-1", "o-1-1");
    assertThat(report.badResults).as("reported once, as a duplicate").isEmpty();
    assertThat(report.allowedDuplicates).isEmpty();
  }

  /** A call that committed, but no row: the enqueue was lost. */
  @Test
  void aCommittedCallWithoutItsRowIsALostEnqueue() {
    DuplicateChecker.Report report =
        OutboxChecker.check(
            history(
                List.of(enqueue("k", 0, 100, "o-0-1")),
                List.of(call("k", 0, "SENT", "o-0-1", 200)),
                List.of()),
            List.of(),
            Map.of(),
            List.of());

    assertThat(report.ok()).isFalse();
    assertThat(report.badResults).singleElement().asString().contains("lost", "o-0-1");
  }

  /** A replay of an id that never committed: the key's one row has another. */
  @Test
  void aReplayOfAnIdThatIsNotTheRowsFailsTheRun() {
    DuplicateChecker.Report report =
        OutboxChecker.check(
            history(
                List.of(enqueue("k", 0, 100, "o-0-1"), enqueue("k", 1, 110, "o-1-1")),
                List.of(
                    call("k", 1, "SENT", "o-1-1", 200),
                    call("k", 2, "REPLAYED_ROLLED_BACK", "o-0-1", 300)),
                List.of()),
            List.of(new Row("k", "o-1-1")),
            Map.of("k", "o-1-1"),
            List.of());

    assertThat(report.badResults)
        .singleElement()
        .asString()
        .contains("REPLAYED_ROLLED_BACK o-0-1", "one outbox row is o-1-1");
  }

  /**
   * The broken variant caught without any retry: the application rolled back, and the row stayed,
   * with no record of its key (so the next retry would enqueue it again).
   */
  @Test
  void aRowThatOutlivedItsTransactionsRollbackFailsTheRun() {
    DuplicateChecker.Report report =
        OutboxChecker.check(
            history(
                List.of(enqueue("k", 0, 100, "o-0-1")),
                List.of(call("k", 0, "SENT_ROLLED_BACK", "o-0-1", 200)),
                List.of()),
            List.of(new Row("k", "o-0-1")),
            Map.of(),
            List.of());

    assertThat(report.ok()).isFalse();
    assertThat(report.badResults)
        .anySatisfy(line -> assertThat(line).contains("outlived its transaction's rollback"))
        .anySatisfy(line -> assertThat(line).contains("committed without the key's record"));
  }

  /** A failed call whose sender had enqueued: its row must have rolled back with it. */
  @Test
  void aFailedCallsEnqueueThatCommittedFailsTheRun() {
    DuplicateChecker.Report report =
        OutboxChecker.check(
            history(
                List.of(enqueue("k", 0, 100, "o-0-1")),
                List.of(call("k", 0, "SEND_FAILED", "o-0-1", 200)),
                List.of()),
            List.of(new Row("k", "o-0-1")),
            Map.of("k", "o-0-1"),
            List.of());

    assertThat(report.badResults).singleElement().asString().contains("(SEND_FAILED)");
  }

  /** A record with no row, and a key still locked once the clients stopped. */
  @Test
  void aRecordWithoutItsRowAndAStuckKeyFailTheRun() {
    DuplicateChecker.Report report =
        OutboxChecker.check(
            history(List.of(), List.of(), List.of()),
            List.of(),
            Map.of("k", "o-0-1"),
            List.of("held"));

    assertThat(report.ok()).isFalse();
    assertThat(report.badResults).singleElement().asString().contains("no outbox row");
    assertThat(report.stuck).containsExactly("held");
  }
}
