package dev.idempotency;

import dev.idempotency.spi.RecordState;

/**
 * Takes a {@link Batch}'s reports ({@link Batch#succeeded}, {@link Batch#failed}) to its writer:
 * marks the item reported, queues its outcome (or release) and has it written, by the lease keeper,
 * at once when a chunk is full, or on the reporting thread where nothing else would write it. A
 * report passes the {@link BatchReportGate}, so that {@link Batch#record()} waits for it.
 *
 * <p>Thread-safe: reports come from any thread, each once per item.
 */
final class BatchReports {

  private final GuardSettings settings;
  private final BatchWriter writer;
  private final BatchLeases leases;
  private final BatchReportGate gate;
  private final BatchKeeperWatch watch;

  BatchReports(
      GuardSettings settings,
      BatchWriter writer,
      BatchLeases leases,
      BatchReportGate gate,
      BatchKeeperWatch watch) {
    this.settings = settings;
    this.writer = writer;
    this.leases = leases;
    this.gate = gate;
    this.watch = watch;
  }

  /**
   * Queues an outcome ({@code state} null: release) and writes a full chunk at once. The item's
   * fields are published to the writer by the queue. The report passes the {@link BatchReportGate}
   * from its check of {@code record()} to the queue, so that {@code record()} waits for it; if
   * {@code record()} stopped waiting meanwhile, this thread writes the queue itself.
   *
   * <p>Against the guard's close, the item counts among the guard's running calls until its outcome
   * is queued and the batch watched by the lease keeper: a close that waits for running calls finds
   * it queued and writes it ({@link LeaseKeeper#close()}). If the close began to write before the
   * batch was watched (it gave up on this report after its grace period), the keeper refuses the
   * watch and this thread writes the queue itself, so nothing queued is left unwritten.
   */
  void report(Batch.Item item, RecordState state, byte[] payload, Throwable failure) {
    if (!gate.enter()) {
      reportAfterRecord(item, state, payload, failure);
      return;
    }
    boolean queued = false;
    boolean keeperWrites = true;
    boolean writeHere;
    try {
      markReported(item, state, payload, failure);
      try {
        queued = queue(item, state, failure);
        if (queued) {
          keeperWrites = watch.keepWatched();
        }
      } finally {
        item.stopRunning(settings.inFlight); // only now may a waiting close() go on
      }
    } finally {
      writeHere = gate.leave();
    }
    if (!queued) {
      return; // a fail-open send or an abandoned outcome: there is no claim to write to
    }
    if (writeHere || !keeperWrites) {
      // record() has stopped waiting for this report, or the guard closed its keeper without it
      writer.writeNow();
      return;
    }
    writer.writeIfChunkFull();
  }

  /**
   * The report of a key handed out before {@link Batch#record()} began, whose send may have been
   * running when {@code record()} ran: {@code record()} left it claimed (see {@link
   * BatchWriter#finish}), so this thread writes its outcome (or release) now, fenced. Any other
   * report after {@code record()} is refused: that key was released or written by it.
   */
  private void reportAfterRecord(
      Batch.Item item, RecordState state, byte[] payload, Throwable failure) {
    if (!item.handedOut()) {
      throw new IllegalStateException("record() was already called");
    }
    boolean queued;
    try {
      markReported(item, state, payload, failure);
      queued = queue(item, state, failure);
    } finally {
      item.stopRunning(settings.inFlight);
    }
    if (queued) {
      writer.writeNow();
    }
  }

  /** Marks the item reported, with its outcome; throws if it was reported before. */
  private void markReported(Batch.Item item, RecordState state, byte[] payload, Throwable failure) {
    int before = item.state.get();
    if ((before != Batch.Item.NEW && before != Batch.Item.LAPSED)
        || !item.state.compareAndSet(before, Batch.Item.REPORTED)) {
      throw new IllegalStateException(
          item.state.get() == Batch.Item.DONE && gate.isClosed()
              ? "record() was already called" // it released the key before this report came
              : "the item was already reported");
    }
    item.outcome = state;
    item.payload = payload;
    item.failure = failure;
    item.reportedAtMono = GuardSettings.monoNow();
    watch.activeAt(item.reportedAtMono);
  }

  /**
   * Queues a reported item's outcome; {@code false} if there is nothing to write: no claim (a
   * fail-open send), or an abandoned outcome ({@link OutcomeAbandonedException}).
   */
  private boolean queue(Batch.Item item, RecordState state, Throwable failure) {
    if (item.handedOut()) {
      leases.sendEnded(item.handedOutAt, settings.leaseNow());
    }
    if (!item.recordable()) {
      item.state.set(Batch.Item.DONE);
      return false;
    }
    if (state == null && CallSupport.senderFailure(failure) instanceof OutcomeAbandonedException) {
      writer.abandon(item);
      return false;
    }
    writer.enqueue(item);
    return true;
  }
}
