package dev.idempotency;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.RecordState;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The outcomes of sends whose writes the store did not take in the call's own attempts ({@link
 * IdempotencyGuard.Builder#completionAttempts}): the caller got its result at once (SPEC 6), and
 * the guard goes on writing the outcome, fenced, in the background, so that a store back within the
 * lease still records the send and a repeat replays it instead of sending again (SPEC 1).
 *
 * <ol>
 *   <li>Every blocking, async and batch path hands its unwritten outcome here ({@link #adopt}); at
 *       most {@link IdempotencyGuard.Builder#maxPendingOutcomes} wait at once.
 *   <li>A round, on the guard's one thread for it, writes everything pending in chunks of {@link
 *       dev.idempotency.spi.KeyStore#maxBatchSize()}; after a store failure the next round waits 50
 *       ms, then twice as long each time, at most a second. A chunk that fails for one record the
 *       store cannot read is written key by key ({@link ChunkCompletion}): that key's failure is
 *       its own, and the later chunks are written in the same round.
 *   <li>A write ends when the store takes it ({@link Type#OUTCOME_RECORDED_LATE}), refuses it by
 *       fencing (another call took the key over), or once its lease has ended by the guard's
 *       estimate ({@link Type#OUTCOME_ABANDONED}, one WARN per round, without keys). Meanwhile the
 *       lease keeper goes on renewing the claim; a renewal that succeeds gives the write longer.
 *   <li>Each pending write counts as a running call, so {@link IdempotencyGuard#close()} lets it
 *       finish within its grace period. Then {@link #close} starts no more rounds, lets a write
 *       already sent to the store finish without interrupting it (the store may apply it), for at
 *       most what is left of {@link IdempotencyGuard#CLOSE_TIMEOUT}, and abandons what was not
 *       written, each outcome once, with one WARN saying how many, before it returns.
 * </ol>
 *
 * Thread-safe.
 */
final class PendingOutcomes {

  /** One outcome waiting to be written; ended once, by the writer or by {@link #close}. */
  private static final class Pending {
    final CallSupport<?> call;
    final Claim claim;
    final RecordState state;
    final byte[] payload;
    final int attempt;
    final AtomicBoolean ended = new AtomicBoolean();

    Pending(CallSupport<?> call, Claim claim, RecordState state, byte[] payload) {
      this.call = call;
      this.claim = claim;
      this.state = state;
      this.payload = payload;
      this.attempt = claim.attempt;
    }
  }

  private final GuardSettings settings;
  private final int limit;

  /** What the next round writes; an entry {@link #close} ended meanwhile is skipped. */
  private final ConcurrentLinkedQueue<Pending> queue = new ConcurrentLinkedQueue<>();

  /** Every outcome adopted and not yet ended, wherever it is: queued or in a round's hands. */
  private final Set<Pending> unfinished = ConcurrentHashMap.newKeySet();

  private final AtomicBoolean scheduled = new AtomicBoolean();
  private final ScheduledThreadPoolExecutor thread;

  /**
   * Orders {@link #adopt} and {@link #close}: an outcome is adopted before the close, or refused.
   */
  private final Object closing = new Object();

  private volatile boolean closed;

  /** The thread running a round now, or {@code null}. */
  private volatile Thread writer;

  /** Claims given up on with nothing sent, taken back in the background; closed with this. */
  final UnsentClaims unsentClaims;

  /** Store failures in a row; only the writer's thread touches it. */
  private int failedRounds;

  PendingOutcomes(GuardSettings settings, int limit) {
    this.settings = settings;
    this.limit = limit;
    this.thread =
        new ScheduledThreadPoolExecutor(
            1, DefaultExecutors.daemonThreads(settings.executors.threadPrefix + "outcome-writer"));
    thread.setKeepAliveTime(30, TimeUnit.SECONDS);
    thread.allowCoreThreadTimeOut(true);
    thread.setExecuteExistingDelayedTasksAfterShutdownPolicy(false);
    this.unsentClaims = new UnsentClaims(settings, limit);
  }

  /**
   * Takes over the write of an outcome the call could not record, if its claim is still live and
   * there is room. The call must still be running (counted in {@link GuardSettings#inFlight}).
   *
   * @return {@code true} if it will be written in the background: the caller then leaves the claim
   *     watched by the keeper, and this class finishes it
   */
  boolean adopt(CallSupport<?> call, Claim claim, RecordState state, byte[] payload) {
    if (limit == 0 || claim.lapsedBy(settings.leaseNow())) {
      return false;
    }
    synchronized (closing) {
      if (closed || unfinished.size() >= limit) {
        return false;
      }
      settings.inFlight.continueRunning();
      if (settings.leaseRenewal) {
        // bounded like a send's renewal; a batch's claim, renewed by its batch until now, had no
        // limit
        claim.renewAtMostUntil(GuardSettings.monoNow() + settings.leaseRenewalLimitNanos);
        settings.keeper.watch(claim);
      }
      Pending pending = new Pending(call, claim, state, payload);
      unfinished.add(pending);
      queue.add(pending);
    }
    schedule(0);
    return true;
  }

  private void schedule(long delayMillis) {
    if (closed || !scheduled.compareAndSet(false, true)) {
      return;
    }
    try {
      thread.schedule(this::round, delayMillis, TimeUnit.MILLISECONDS);
    } catch (RejectedExecutionException e) {
      scheduled.set(false);
    }
  }

  /** One round: drop what lapsed, write the rest in chunks, schedule the next if any are left. */
  private void round() {
    scheduled.set(false);
    writer = Thread.currentThread();
    try {
      writeRound();
    } finally {
      writer = null;
    }
  }

  private void writeRound() {
    List<Pending> writes = new ArrayList<>();
    int lapsed = 0;
    int takenOver = 0;
    long now = settings.leaseNow();
    Pending next;
    while ((next = queue.poll()) != null) {
      if (next.ended.get()) {
        continue; // abandoned by close()
      } else if (next.claim.isLost()) {
        takenOver += end(next, Type.OUTCOME_ABANDONED);
      } else if (next.claim.lapsedBy(now)) {
        lapsed += end(next, Type.OUTCOME_ABANDONED);
      } else {
        writes.add(next);
      }
    }
    int chunkSize = Math.max(1, settings.store.maxBatchSize());
    boolean failed = false;
    for (int from = 0; from < writes.size(); from += chunkSize) {
      List<Pending> chunk = writes.subList(from, Math.min(writes.size(), from + chunkSize));
      if (failed || closed) {
        queue.addAll(chunk); // closing: close() abandons them
        continue;
      }
      ChunkCompletion.Result result;
      try {
        result = ChunkCompletion.completeAll(settings.store, requests(chunk));
      } catch (RuntimeException e) {
        CallEvents.log.debug("A background outcome write failed; trying again", e);
        failed = true;
        queue.addAll(chunk);
        continue;
      }
      if (result.failure() != null) {
        CallEvents.log.debug("A background outcome write failed; trying again", result.failure());
        failed = true;
      }
      for (int i = 0; i < chunk.size(); i++) {
        Boolean written = result.written().get(i);
        if (written == null) {
          queue.add(chunk.get(i)); // not tried: the store failed meanwhile
        } else if (written) {
          end(chunk.get(i), Type.OUTCOME_RECORDED_LATE);
        } else {
          takenOver += end(chunk.get(i), Type.OUTCOME_ABANDONED);
        }
      }
    }
    if (lapsed + takenOver > 0) {
      CallEvents.log.warn(
          "Gave up recording {} sent outcomes in the background ({} whose leases ended while the"
              + " store did not take them, {} refused by the store: taken over by another call, or"
              + " a record it cannot read): a repeat of those keys may send again",
          lapsed + takenOver,
          lapsed,
          takenOver);
    }
    failedRounds = failed ? failedRounds + 1 : 0;
    if (!closed && !queue.isEmpty()) {
      schedule(failed ? CallSupport.completionBackoffMillis(failedRounds) : 0);
    }
  }

  private List<CompleteRequest> requests(List<Pending> chunk) {
    List<CompleteRequest> requests = new ArrayList<>(chunk.size());
    for (Pending pending : chunk) {
      requests.add(pending.call.complete(pending.claim, pending.state, pending.payload));
    }
    return requests;
  }

  /**
   * Ends an outcome's write, unless it has ended already (the writer and {@link #close} race for an
   * outcome whose store call was still unanswered when close() stopped waiting).
   *
   * @return 1 if this call ended it, 0 if it had ended
   */
  private int end(Pending pending, Type type) {
    if (!pending.ended.compareAndSet(false, true)) {
      CallEvents.log.debug(
          "The background write of key {} ended ({}) after close() had abandoned it",
          pending.call.keyId,
          type);
      return 0;
    }
    unfinished.remove(pending);
    try {
      pending.call.finishPending(pending.claim);
      pending.call.events.emit(type, pending.attempt, pending.call.events.elapsed(), null);
      if (type == Type.OUTCOME_RECORDED_LATE) {
        CallEvents.log.debug(
            "Recorded the outcome of key {} in the background", pending.call.keyId);
      }
    } finally {
      settings.inFlight.exit();
    }
    return 1;
  }

  /**
   * The guard is closing and its grace period is over: starts no more rounds; lets a write already
   * sent to the store finish, never interrupting it (the store may apply it: it is reported as what
   * it was), until {@code deadlineNanos} ({@link System#nanoTime()}) at most, so a store that never
   * answers does not hold close() up; then abandons, once each, what was not written, as a crash
   * would (no release; the leases run out), with one WARN saying how many; and drops the claims not
   * yet taken back ({@link UnsentClaims#close()}). All of it is reported before this returns.
   *
   * @return how many outcomes were abandoned
   */
  int close(long deadlineNanos) {
    synchronized (closing) {
      closed = true; // adopt() refuses from now on; a round starts no more store calls
    }
    thread.shutdown(); // drops a round waiting for its back-off; interrupts no write
    unsentClaims.close();
    awaitRoundInProgress(deadlineNanos);
    return abandonUnfinished();
  }

  /** Waits, until the deadline at most, for a round in progress to end; never gives up early. */
  private void awaitRoundInProgress(long deadlineNanos) {
    if (Thread.currentThread() == writer) {
      return; // close() from a listener of a round: that round goes on once close() returns
    }
    boolean interrupted = false;
    while (true) {
      try {
        long left = deadlineNanos - System.nanoTime();
        if (left <= 0 || thread.awaitTermination(left, TimeUnit.NANOSECONDS)) {
          break;
        }
      } catch (InterruptedException e) {
        interrupted = true; // the closing thread's: kept, but the write is still waited for
      }
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
  }

  private int abandonUnfinished() {
    int abandoned = 0;
    for (Pending pending : unfinished) {
      abandoned += end(pending, Type.OUTCOME_ABANDONED);
    }
    queue.clear();
    if (abandoned > 0) {
      CallEvents.log.warn(
          "Closed the idempotency guard with {} sent outcomes not yet recorded (the store did not"
              + " take them within the grace period, or had not answered for them when close()"
              + " stopped waiting): a repeat of those keys may send again once their leases end",
          abandoned);
    }
    return abandoned;
  }
}
