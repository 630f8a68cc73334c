package dev.idempotency.reliability;

import dev.idempotency.reliability.FaultHistory.Call;
import dev.idempotency.reliability.FaultHistory.Fault;
import dev.idempotency.reliability.FaultHistory.Send;
import dev.idempotency.reliability.FaultHistory.StoreCall;
import java.util.List;

/** Builds the hand-written fault histories of the {@link DuplicateChecker} tests. */
final class HandWrittenHistories {

  private HandWrittenHistories() {}

  /** A history of these sends, calls, faults and clients' store calls, with the default lease. */
  static FaultHistory history(
      List<Send> sends, List<Call> calls, List<Fault> faults, StoreCall... storeCalls) {
    FaultHistory history = new FaultHistory();
    history.sends.addAll(sends);
    history.calls.addAll(calls);
    history.faults.addAll(faults);
    history.storeCalls.addAll(List.of(storeCalls));
    return history;
  }
}
