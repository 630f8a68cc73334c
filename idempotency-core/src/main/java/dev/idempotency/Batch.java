package dev.idempotency;

import dev.idempotency.spi.KeyStore;
import dev.idempotency.spi.RecordState;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;

/**
 * A batch of keys claimed together by {@link IdempotencyGuard#claimBatch}, for a campaign's
 * recipients:
 *
 * <pre>{@code
 * Batch<String> batch = guard.claimBatch(requests, ResultCodec.string());
 * for (Batch.Item item : batch.toSend()) {
 *   try {
 *     batch.succeeded(item, provider.send(recipientOf(item.key()), item.context().providerKey()));
 *   } catch (Exception e) {
 *     batch.failed(item, e);
 *   }
 * }
 * Batch.Recorded recorded = batch.record();
 * }</pre>
 *
 * <p>Per key, everything {@link IdempotencyGuard#execute} guarantees holds: a claimed key is fenced
 * by its own owner token; a repeat within the window is replayed; a failure of one recipient
 * releases (or, if permanent, stores) only that key. A batch does not wait for keys in flight: it
 * hands them back in {@link #inFlight()} for the caller to retry later. A store failure is reported
 * per key in {@link #refused()}, never skipped silently.
 *
 * <p><b>However long the batch runs.</b> A campaign of 10,000 recipients outlives any sensible
 * lease, so the batch keeps its keys itself, in the background, on the guard's lease keeper:
 *
 * <ul>
 *   <li>outcomes are written as they are reported, one round trip per {@link
 *       KeyStore#maxBatchSize() chunk} as soon as a chunk is full, and otherwise after at most the
 *       keeper's period (a quarter of the lease, at most a second), so a sent key never waits for
 *       {@link #record()} to be recorded;
 *   <li>the leases of the keys not yet recorded are renewed, fenced by their owner tokens, one
 *       round trip per chunk; keys not yet handed out stop being renewed once the batch has been
 *       idle (nothing handed out or reported) for the guard's renewal limit;
 *   <li>{@link #toSend()} hands a key out only while its lease has more than a quarter of its
 *       length left: a key whose lease lapsed (the store was unreachable, the process paused) is
 *       never handed out; it goes to {@link #lapsed()} and is released, for a later retry.
 * </ul>
 *
 * So a batch whose single sends each finish within the lease never sends a key twice, however long
 * the whole batch runs and whoever claims the same keys meanwhile.
 *
 * <p>{@link #toSend()} may be iterated again (it skips reported keys), {@link #succeeded} and
 * {@link #failed} may be called from several threads, each once per item; {@link #record()} once,
 * at the end: it waits for reports already begun, writes what is left and releases the keys without
 * an outcome. Once {@link #record()} has begun, {@link #toSend()} hands out no more keys (a {@code
 * next()} then throws {@link java.util.ConcurrentModificationException}); a key handed out before
 * and not reported yet, whose send may still run (on the loop's thread, or on an executor the loop
 * gave it to: the batch cannot tell), is not released: it stays claimed (renewed for the renewal
 * limit from its hand-out), {@code record()} lists it in {@link Recorded#notRecorded()}, and its
 * report, accepted after {@code record()}, writes its outcome on the reporting thread; never
 * reported, it runs out one lease later, as after a crash. Still, call {@code record()} once every
 * send loop ended, to have every outcome counted; a caller that knows its unreported keys were not
 * sent has them released with {@link #recordReleasingUnreported()}. A batch is {@link
 * AutoCloseable}: in a try-with-resources block, a send loop that throws half-way still has what it
 * reported written and the keys it never handed out released; the key it was sending when it threw
 * (reported neither {@link #succeeded} nor {@link #failed}) stays claimed, as above, so that a
 * provider call still running elsewhere is not sent again: report it {@code failed} in the loop (as
 * above) to have it released at once. A batch abandoned without either has its reported outcomes
 * written in the background, its keys renewed for no longer than the guard's renewal limit, and is
 * then let go (nothing keeps it reachable); its other keys run out one lease later. When the guard
 * closes, a report already begun is waited for as a running call is (within the grace period) and
 * its outcome written by the close; one the close no longer waits for writes its outcome itself, on
 * the reporting thread.
 *
 * <p>Before it hands out a key, a batch looks one send ahead by the guard's clock (the longest send
 * it has seen, plus a quarter lease): it writes the reported outcomes and renews the unreported
 * keys whose leases would end sooner, and does not hand out a key whose lease would still end
 * before its send could. So neither a key being sent nor a reported outcome lapses when that clock
 * runs ahead of the keeper's real-time schedule (a forward step, a test clock). Outcomes and
 * releases are written even on an interrupted thread (the interrupt is kept for the caller).
 *
 * @param <T> the result type
 */
public final class Batch<T> implements AutoCloseable {

  /** A claimed key the caller may send for. */
  public static final class Item {
    static final int NEW = 0;
    static final int REPORTED = 1;
    static final int DONE = 2;
    static final int LAPSED = 3;

    private final Batch<?> batch;
    final CallSupport<?> call;
    private final SendContext context;
    final Claim claim;
    final AtomicInteger state = new AtomicInteger(NEW);

    /** When handed out ({@code next()} returned it), on the monotonic clock; 0 before. */
    private volatile long handedOutAtMono;

    /**
     * When its hand-out was checked ({@code hasNext()}), on the lease scale (the guard's clock);
     * valid once handed out.
     */
    volatile long handedOutAt;

    /** Whether the item was ever handed out to be sent (a send may have started under it). */
    boolean handedOut() {
      return handedOutAtMono != 0;
    }

    /** When handed out, on the monotonic clock; 0 before. */
    long handedOutAtMono() {
      return handedOutAtMono;
    }

    /**
     * Marks the item handed out, as {@code next()} returns it.
     *
     * @return {@code false} if it was handed out before, or is no longer to send (reported, lapsed,
     *     recorded, its claim lost, or the guard gave up on its running calls)
     */
    synchronized boolean markHandedOut(long nowMono) {
      if (handedOutAtMono != 0 || state.get() != NEW || batch.reports.isClosed()) {
        return false; // once record() began, nothing is handed out: it releases what it finds NEW
      }
      if (batch.settings.gaveUp()) {
        // the guard closed past its grace period (since hasNext(), or while next() renewed): its
        // keeper renews nothing, so a send started now could outlive its lease and be taken over
        return false;
      }
      if (!startRunning(batch.settings.inFlight)) {
        return false; // the guard is closing: no send starts now
      }
      if (claim != null && !claim.start()) {
        stopRunning(batch.settings.inFlight);
        return false; // lost since its check (a renewal on another thread failed or was refused)
      }
      handedOutAtMono = nowMono == 0 ? 1 : nowMono;
      handedOutTo = Thread.currentThread();
      return true;
    }

    /** The thread {@code next()} handed the item out on; {@code null} before. */
    private volatile Thread handedOutTo;

    /**
     * Whether the item was handed out and not reported: its send may still run, on whatever thread
     * the caller handed it to (the thread {@code next()} returned it on may have passed it to an
     * executor), so {@link #record()} leaves it claimed for its report. With {@code
     * releaseHandedOutHere} ({@link #recordReleasingUnreported()}), one handed out on this thread
     * is not: its caller says that no send of it runs any more.
     */
    boolean mayStillBeSending(boolean releaseHandedOutHere) {
      return handedOut()
          && state.get() == NEW
          && !(releaseHandedOutHere && handedOutTo == Thread.currentThread());
    }

    /** Whether the item counts among the guard's running calls: handed out, not yet reported. */
    private final AtomicBoolean running = new AtomicBoolean();

    // written by the reporting thread before the item is queued, read by the writer after
    byte[] payload;
    RecordState outcome;
    Throwable failure;
    long reportedAtMono;

    Item(Batch<?> batch, CallSupport<?> call, SendContext context, Claim claim) {
      this.batch = batch;
      this.call = call;
      this.context = context;
      this.claim = claim;
    }

    /**
     * The idempotency key.
     *
     * @return the key
     */
    public String key() {
      return call.request.key();
    }

    /**
     * What the send needs: the provider keys and the attempt.
     *
     * @return the context
     */
    public SendContext context() {
      return context;
    }

    boolean recordable() {
      return claim != null;
    }

    int attempt() {
      return context.attempt();
    }

    /**
     * Counts the item among the guard's running calls, as it is handed out (under its monitor, in
     * {@link #markHandedOut}: once); {@code false} if the guard is closing.
     */
    private boolean startRunning(CallsInFlight inFlight) {
      if (running.get()) {
        return true;
      }
      if (!inFlight.enter()) {
        return false;
      }
      if (!running.compareAndSet(false, true)) {
        inFlight.exit(); // counted already
      }
      return true;
    }

    /** The item was reported or given up: it no longer counts as running. Safe to call twice. */
    void stopRunning(CallsInFlight inFlight) {
      if (running.compareAndSet(true, false)) {
        inFlight.exit();
      }
    }
  }

  /**
   * What the batch wrote, from its first outcome to {@link #record()}.
   *
   * @param completed outcomes recorded as sent
   * @param failuresStored permanent failures stored for the window
   * @param released keys released for a retry (failed transiently, never handed out, lapsed, or
   *     handed out and released by {@link #recordReleasingUnreported()})
   * @param notRecorded keys sent whose outcome could not be recorded (a repeat may send again),
   *     among them those failed with an {@link OutcomeAbandonedException}, and keys handed out
   *     whose send had not been reported when {@link #record()} ran: those stay claimed, and their
   *     report, when it comes, writes their outcome
   */
  public record Recorded(
      int completed, int failuresStored, int released, Set<String> notRecorded) {}

  private final GuardSettings settings;
  private final BatchWriter writer;
  private final BatchLeases leases;
  private final BatchKeeperWatch watch;
  private final BatchReports reporting;

  /**
   * The claimed items, one list per claimed chunk, appended as chunks are claimed (so that the
   * keeper renews the first chunks while later ones are claimed, and claiming a large batch copies
   * nothing already claimed).
   */
  private final List<List<Item>> chunks = new CopyOnWriteArrayList<>();

  private final Iterable<Item> claimed = () -> chunks.stream().flatMap(List::stream).iterator();

  private int claimedCount() {
    int count = 0;
    for (List<Item> chunk : chunks) {
      count += chunk.size();
    }
    return count;
  }

  private final BatchClaims<T> answers;
  private final BatchReportGate reports = new BatchReportGate();
  private final BatchHandOut handOut;

  Batch(GuardSettings settings, List<IdempotencyRequest> requests, ResultCodec<T> codec) {
    this.settings = settings;
    this.writer = new BatchWriter(settings);
    this.leases = new BatchLeases(settings);
    this.watch = new BatchKeeperWatch(settings, writer, claimed);
    this.reporting = new BatchReports(settings, writer, leases, reports, watch);
    this.answers = new BatchClaims<>(settings, this);
    this.handOut = new BatchHandOut(settings, writer, leases, reports, watch, claimed);
    List<CallSupport<T>> all = answers.toClaim(requests, codec);
    watch.activeAt(GuardSettings.monoNow());
    int chunkSize = writer.chunkSize;
    for (int from = 0; from < all.size(); from += chunkSize) {
      claim(all.subList(from, Math.min(all.size(), from + chunkSize)));
    }
  }

  private void claim(List<CallSupport<T>> chunk) {
    List<Item> items = answers.claim(chunk);
    renewIfLate(items);
    for (Item item : items) {
      if (item.claim != null && !item.claim.isLost()) {
        leases.claimed(item.claim.leaseDeadline());
      }
    }
    if (!items.isEmpty()) {
      chunks.add(Collections.unmodifiableList(items));
      watch.keepWatched();
    }
  }

  /**
   * A chunk the store answered after more than half its lease is renewed at once, in one call, as a
   * single call's claim is ({@link LeaseKeeper#renewLate}); keys it refuses, or cannot renew, are
   * lost and never handed out.
   */
  private void renewIfLate(List<Item> chunk) {
    List<Claim> claims = new ArrayList<>();
    for (Item item : chunk) {
      if (item.claim != null) {
        claims.add(item.claim);
      }
    }
    settings.keeper.renewLate(claims);
  }

  /**
   * The keys claimed for this batch, to send now: each is handed out only while its lease has more
   * than a quarter of its length left, so send them in order as you iterate. Report each with
   * {@link #succeeded} or {@link #failed}. Each key is handed out once: keys handed out before
   * (reported or not: their send may still run), and keys whose lease lapsed (see {@link
   * #lapsed()}), are skipped; iterating again hands out only what was never handed out. A key is
   * handed out when {@code next()} returns it: one that {@code hasNext()} only looked at is taken
   * back at {@link #record()}, or handed out by a later iteration.
   *
   * @return the keys to send, in request order; not thread-safe to iterate from several threads
   */
  public Iterable<Item> toSend() {
    return handOut::iterator;
  }

  /**
   * Every key this batch claimed to send, in request order, whether sent yet or not: for counts and
   * logs. Send through {@link #toSend()}, which checks each key's lease as it hands it out.
   *
   * @return the keys
   */
  public List<String> claimedKeys() {
    List<String> keys = new ArrayList<>(claimedCount());
    for (Item item : claimed) {
      keys.add(item.key());
    }
    return Collections.unmodifiableList(keys);
  }

  /**
   * Keys sent before within their window, with their stored results: do not send them.
   *
   * @return key to outcome, in request order
   */
  public Map<String, Outcome<T>> replayed() {
    return Collections.unmodifiableMap(answers.replayed);
  }

  /**
   * Keys another caller is sending right now: retry them later.
   *
   * @return the keys
   */
  public List<String> inFlight() {
    return Collections.unmodifiableList(answers.inFlight);
  }

  /**
   * Keys this batch claimed but did not hand out, because their lease lapsed before their turn (the
   * store could not be reached to renew it for about a lease, or the process was paused) or the
   * guard was closing ({@link IdempotencyGuard#close()}). They were not sent; they are released at
   * {@link #record()}: retry them later.
   *
   * @return the keys, growing while the batch runs
   */
  public List<String> lapsed() {
    return Collections.unmodifiableList(handOut.lapsed());
  }

  /**
   * Keys that must not be sent, with the exception {@code execute} would have thrown: key reuse, a
   * stored permanent failure, an unknown outcome (strict mode), an unavailable result, or a store
   * failure.
   *
   * @return key to exception, in request order
   */
  public Map<String, IdempotencyException> refused() {
    return Collections.unmodifiableMap(answers.refused);
  }

  /**
   * Reports a successful send. The outcome is written with others of the batch: at once when a
   * chunk is full (on this thread), else within the keeper's period, or by the guard's close; after
   * the close, on this thread.
   *
   * <p>A report that has begun when another thread calls {@link #record()} is waited for by it and
   * written with the rest; one that begins after {@code record()} is written on this thread if the
   * item was handed out before (its send may have been running then, so {@code record()} left it
   * claimed), and refused otherwise.
   *
   * @param item an item of {@link #toSend()}
   * @param result the provider's result; may be {@code null}
   * @throws IllegalStateException if the item was reported before, or {@link #record()} was called
   *     and the item was not handed out (or {@link #recordReleasingUnreported()} released it)
   */
  @SuppressWarnings("unchecked")
  public void succeeded(Item item, @Nullable T result) {
    requireReportable(item);
    reporting.report(
        item,
        RecordState.COMPLETED,
        ((CallSupport<T>) item.call).encode(result, item.attempt()),
        null);
  }

  /**
   * Reports a failed send: the key is released for a retry, or its failure stored if the guard's
   * {@link FailureClassifier} calls it permanent. An {@link OutcomeAbandonedException} leaves the
   * key claimed, as {@code execute} does and a crash would: nothing is written or released, its
   * lease is no longer renewed ({@link IdempotencyEvent.Type#OUTCOME_ABANDONED}), and {@link
   * #record()} lists it in {@link Recorded#notRecorded()}; a repeat may take it over once the lease
   * has run out.
   *
   * @param item an item of {@link #toSend()}
   * @param failure what the send threw
   * @throws IllegalStateException if the item was reported before, or {@link #record()} was called
   *     and the item was not handed out (or {@link #recordReleasingUnreported()} released it)
   */
  public void failed(Item item, Throwable failure) {
    Objects.requireNonNull(failure, "failure must not be null");
    requireReportable(item);
    Throwable cause = CallSupport.senderFailure(failure);
    if (cause instanceof OutcomeAbandonedException) {
      reporting.report(item, null, null, failure); // left claimed: nothing is written
    } else if (item.call.isPermanent(cause)) {
      reporting.report(item, RecordState.FAILED, item.call.failurePayload(cause), failure);
    } else {
      reporting.report(item, null, null, failure);
    }
  }

  private void requireReportable(Item item) {
    Objects.requireNonNull(item, "item must not be null");
    if (item.batch != this) {
      throw new IllegalArgumentException("the item does not belong to this batch");
    }
    if (reports.isClosed() && !item.handedOut()) {
      throw new IllegalStateException("record() was already called");
    }
  }

  /**
   * Records every outcome still waiting, and releases the keys that got none (never reported,
   * lapsed): completions in one round trip per chunk (retried a few times on store failure),
   * releases one key at a time. Never throws for a store failure after the sends: such keys are
   * listed in {@link Recorded#notRecorded()} and reported as {@link
   * IdempotencyEvent.Type#OUTCOME_NOT_RECORDED}.
   *
   * <p>Reports that other threads have begun are waited for, for at most the guard's {@link
   * IdempotencyGuard.Builder#closeGracePeriod close grace period}, and written with the rest; a
   * report still running after that writes its own outcome (it is not counted here). A key handed
   * out and not reported when this runs may still be being sent, on whatever thread the caller gave
   * it to (the one it was handed out on may have passed it to an executor): it is left claimed, not
   * released (a repeat would send it again), listed in {@link Recorded#notRecorded()}, renewed for
   * the renewal limit from its hand-out, counted among the guard's running calls (a guard closing
   * meanwhile waits for it within its grace period), and its report, made after this call, writes
   * its outcome on the reporting thread; never reported, it runs out one lease after its last
   * renewal. Other reports that begin after this call are refused with an {@link
   * IllegalStateException}.
   *
   * @return what the batch wrote in all
   * @throws IllegalStateException if called twice
   */
  public Recorded record() {
    return record(false);
  }

  /**
   * Records as {@link #record()} does, and releases for a retry, besides, the keys handed out on
   * this thread and not reported, instead of leaving them claimed: for a caller that ran its sends
   * on this thread, knows that they have ended, and knows that a key it did not report was not sent
   * (or that its send was undone, a transaction rolled back), so that it comes back to be sent
   * again. Keys handed out on other threads and not reported stay claimed, as with {@code
   * record()}. A key released so whose send did run is sent again by a repeat within the window:
   * when in doubt, call {@code record()}.
   *
   * @return what the batch wrote in all
   * @throws IllegalStateException if {@code record()} was called before
   */
  public Recorded recordReleasingUnreported() {
    return record(true);
  }

  private Recorded record(boolean releaseHandedOutHere) {
    if (!reports.close()) {
      throw new IllegalStateException("record() was already called");
    }
    int stillReporting = reports.awaitReports(settings.closeGraceNanos);
    if (stillReporting > 0) {
      CallEvents.log.warn(
          "record() of a batch stopped waiting after {} ms for {} reports still running; they"
              + " write their own outcomes, not counted in what record() returns",
          java.util.concurrent.TimeUnit.NANOSECONDS.toMillis(settings.closeGraceNanos),
          stillReporting);
    }
    watch.stopForRecord();
    Recorded recorded = writer.finish(claimed, releaseHandedOutHere);
    watch.recorded(); // keys whose sends still run elsewhere stay claimed, renewed
    return recorded;
  }

  /**
   * Records the batch unless {@link #record()} was called, as {@code record()} does: writes every
   * outcome reported so far and releases the keys never handed out, so that a send loop that throws
   * half-way leaves claimed only the keys it was handed and did not report (their sends may still
   * run: see {@link #record()}). For try-with-resources:
   *
   * <pre>{@code
   * try (Batch<String> batch = guard.claimBatch(requests, ResultCodec.string())) {
   *   for (Batch.Item item : batch.toSend()) {
   *     batch.succeeded(item, provider.send(recipientOf(item.key()), item.context().providerKey()));
   *   }
   * }
   * }</pre>
   *
   * Never throws for a store failure (see {@link #record()}); idempotent.
   */
  @Override
  public void close() {
    if (!reports.isClosed()) {
      try {
        record();
      } catch (IllegalStateException alreadyRecorded) {
        // record() was called concurrently: nothing left to do
      }
    }
  }
}
