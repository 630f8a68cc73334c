package dev.idempotency.reliability;

import dev.idempotency.reliability.FaultHistory.Call;
import dev.idempotency.reliability.FaultHistory.Fault;
import dev.idempotency.reliability.FaultHistory.Send;
import dev.idempotency.reliability.OutboxTable.Row;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * Checks a joined-transaction fault run ({@link OutboxFaultRunChild}) afterwards, against what the
 * database holds once every client stopped: the committed outbox rows, and each key's committed
 * record as a probe replayed it. Joined, the key's record and the enqueue commit or roll back as
 * one, so no cause excuses a duplicate here, kills included:
 *
 * <ul>
 *   <li>a key with more than one outbox row is a duplicate enqueue ({@code brokenDuplicates});
 *   <li>a call that committed its enqueue ({@code SENT}), or that replayed a committed record
 *       ({@code REPLAYED}, whether the application then committed or not), got the id of the key's
 *       one outbox row: no row is a lost enqueue, another id a replay of something never committed
 *       ({@code badResults});
 *   <li>a first call that was rolled back ({@code SENT_ROLLED_BACK} by the application, or after a
 *       failure of the call) left no row with its id: the enqueue did not outlive its transaction
 *       (a call whose commit threw may have committed or not, and is not checked);
 *   <li>every row's key has a committed record that replays that row's id, and every committed
 *       record has its row: a row without its record would be enqueued again by the next retry;
 *   <li>no key is still held by a transaction once every client stopped ({@code stuck}).
 * </ul>
 *
 * In the report, {@code sends} counts the committed outbox rows (the enqueues), {@code firstSends}
 * the calls that committed one, {@code killedInFlight} the enqueues that no call ever ended and
 * that did not commit (their process was killed inside the transaction, which the database rolled
 * back), and {@code allowedDuplicates} stays empty.
 */
final class OutboxChecker {

  /** The end of a call whose commit threw: it may or may not have happened. */
  private static final String COMMIT_FAILED = "_COMMIT_FAILED";

  private OutboxChecker() {}

  /**
   * Checks a history.
   *
   * @param rows every committed outbox row
   * @param committed each key's committed record: the value a probe replayed for it
   * @param stuck keys a probe could not claim or replay, still locked after every client stopped
   */
  static DuplicateChecker.Report check(
      FaultHistory history, List<Row> rows, Map<String, String> committed, List<String> stuck) {
    DuplicateChecker.Report report = new DuplicateChecker.Report();
    report.calls = history.calls.size();
    report.sends = rows.size();
    report.longestQuietMillis = DuplicateChecker.longestQuiet(history);
    report.stuck.addAll(stuck);
    for (Fault fault : history.faults) {
      report.faults.merge(fault.type(), 1, Integer::sum);
    }
    Map<String, List<String>> idsByKey = new TreeMap<>();
    Set<String> ids = new HashSet<>();
    for (Row row : rows) {
      idsByKey.computeIfAbsent(row.key(), k -> new ArrayList<>()).add(row.id());
      ids.add(row.id());
    }
    report.keysSent = idsByKey.size();
    for (Map.Entry<String, List<String>> entry : idsByKey.entrySet()) {
      String key = entry.getKey();
      List<String> keyIds = entry.getValue();
      String record = committed.get(key);
      if (keyIds.size() > 1) {
        report.brokenDuplicates.add(
            key + ": " + keyIds.size() + " outbox rows " + keyIds + " (a duplicate enqueue)");
      } else if (record == null) {
        report.badResults.add(
            key
                + ": outbox row "
                + keyIds.get(0)
                + " committed without the key's record (a retry would enqueue it again)");
      } else if (!record.equals(keyIds.get(0))) {
        report.badResults.add(
            key + ": outbox row " + keyIds.get(0) + ", but the key's record replays " + record);
      }
    }
    for (Map.Entry<String, String> entry : committed.entrySet()) {
      if (!idsByKey.containsKey(entry.getKey())) {
        report.badResults.add(
            entry.getKey()
                + ": the key's record replays "
                + entry.getValue()
                + ", but no outbox row committed with it");
      }
    }
    Set<String> logged = new HashSet<>();
    for (Call call : history.calls) {
      checkCall(call, idsByKey.getOrDefault(call.key(), List.of()), ids, report);
      logged.add(call.value());
    }
    for (Send send : history.sends) {
      if (!logged.contains(send.result()) && !ids.contains(send.result())) {
        report.killedInFlight++;
      }
    }
    return report;
  }

  private static void checkCall(
      Call call, List<String> keyIds, Set<String> ids, DuplicateChecker.Report report) {
    String outcome = call.outcome();
    if (outcome.equals("SENT")) {
      report.firstSends++;
    } else if (outcome.equals("REPLAYED")) {
      report.replays++;
    }
    boolean mustMatch = outcome.equals("SENT") || outcome.startsWith("REPLAYED");
    boolean rolledBack = call.value() != null && !mustMatch && !outcome.endsWith(COMMIT_FAILED);
    if (rolledBack && ids.contains(call.value())) {
      report.badResults.add(
          call.key()
              + ": enqueue "
              + call.value()
              + " by process "
              + call.process()
              + " outlived its transaction's rollback ("
              + outcome
              + ")");
      return;
    }
    if (!mustMatch || keyIds.size() > 1) {
      return; // a duplicate is reported once, as a duplicate
    }
    if (keyIds.isEmpty()) {
      report.badResults.add(
          call.key()
              + ": lost: "
              + outcome
              + " "
              + call.value()
              + " by process "
              + call.process()
              + ", but the key has no outbox row");
    } else if (!keyIds.get(0).equals(call.value())) {
      report.badResults.add(
          call.key()
              + ": "
              + outcome
              + " "
              + call.value()
              + " by process "
              + call.process()
              + ", but the key's one outbox row is "
              + keyIds.get(0));
    }
  }
}
