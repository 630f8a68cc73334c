package dev.idempotency;

import java.util.ConcurrentModificationException;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * Hands out a {@link Batch}'s claimed keys to send ({@link Batch#toSend()}): each key once, only
 * while its lease outlasts a send by the guard's clock, none once {@link Batch#record()} began or
 * while the guard is closing. A key it does not hand out for its lease, or because the guard is
 * closing, is lapsed ({@link Batch#lapsed()}) and released at {@code record()}.
 *
 * <p>Thread-safe: several iterations may run at once; each iterator is not thread-safe.
 */
final class BatchHandOut {

  private final GuardSettings settings;
  private final BatchWriter writer;
  private final BatchLeases leases;
  private final BatchReportGate reports;
  private final BatchKeeperWatch watch;
  private final Iterable<Batch.Item> claimed;
  private final List<String> lapsed = new CopyOnWriteArrayList<>();

  BatchHandOut(
      GuardSettings settings,
      BatchWriter writer,
      BatchLeases leases,
      BatchReportGate reports,
      BatchKeeperWatch watch,
      Iterable<Batch.Item> claimed) {
    this.settings = settings;
    this.writer = writer;
    this.leases = leases;
    this.reports = reports;
    this.watch = watch;
    this.claimed = claimed;
  }

  /** A new iteration over the claimed keys, in request order. */
  Iterator<Batch.Item> iterator() {
    return new ToSend(claimed.iterator());
  }

  /** The keys lapsed so far, growing while the batch runs. */
  List<String> lapsed() {
    return lapsed;
  }

  /**
   * {@code hasNext()} checks the next key (its lease, the guard not closing) and reserves it; only
   * {@code next()} hands it out. A reserved key that {@code next()} never returned (a loop that
   * stopped after {@code hasNext()}) was not handed out: {@code record()} takes it back.
   */
  private final class ToSend implements Iterator<Batch.Item> {
    private final Iterator<Batch.Item> items;
    private Batch.Item reserved;

    ToSend(Iterator<Batch.Item> items) {
      this.items = items;
    }

    @Override
    public boolean hasNext() {
      while (reserved == null && items.hasNext()) {
        Batch.Item item = items.next();
        if (mayHandOut(item)) {
          reserved = item;
        }
      }
      return reserved != null;
    }

    @Override
    public Batch.Item next() {
      while (hasNext()) {
        Batch.Item item = reserved;
        reserved = null;
        if (!stillLive(item)) {
          continue; // its lease ran out since hasNext() (the loop waited): lapsed, look further
        }
        long nowMono = GuardSettings.monoNow();
        if (item.markHandedOut(nowMono)) {
          watch.activeAt(nowMono);
          return item;
        } // another iteration of toSend() handed it out since hasNext(), its claim was lost, or the
        // guard gave up (closed past its grace period) meanwhile
        lapse(item); // lost, never handed out (it was not counted as running): look further
      }
      if (reports.isClosed()) {
        // fail fast, as the JDK's iterators do on a concurrent change: handing the key out now
        // would have it sent after record() released it
        throw new ConcurrentModificationException(
            "record() began on another thread while toSend() was iterated: no key is handed out"
                + " after it (call record() once the send loops ended)");
      }
      throw new NoSuchElementException(
          "no key left to hand out: those hasNext() found were handed out, reported or lapsed since");
    }
  }

  /**
   * Whether {@code item} may be handed out now; a key whose lease lapsed never is again. First, by
   * the guard's clock and one send ahead ({@link BatchLeases}): the reported outcomes whose leases
   * end sooner are written, and (with lease renewal on) the unreported keys whose leases end sooner
   * are renewed; a key whose lease would still end before its send could is not handed out.
   */
  private boolean mayHandOut(Batch.Item item) {
    if (item.state.get() != Batch.Item.NEW || item.handedOut()) {
      return false; // reported, lapsed, or handed out before (its send may be running): never twice
    }
    if (reports.isClosed()) {
      return false; // record() began (on another thread): it releases the key, so it is not sent
    }
    long now = settings.leaseNow();
    long horizonNanos = leases.horizonNanos();
    writer.writeIfLeaseShort(now, horizonNanos);
    if (item.claim != null) {
      if (settings.leaseRenewal) {
        leases.renewBefore(now + horizonNanos, claimed);
      } // without renewal, a lease is what the claim got: one that ends too soon is not sent on
      if (!item.claim.isLive(now, horizonNanos)) {
        lapse(item);
        return false;
      }
    }
    if (settings.inFlight.closed()) {
      lapse(item); // the guard is closing: no send starts now
      return false;
    }
    // not counted among the guard's running calls here: another iteration may hand the key out,
    // report it and record() end the batch between this check and a count, which nothing would then
    // undo; Item.markHandedOut counts it, once, as it hands it out
    item.handedOutAt = now;
    watch.activeAt(GuardSettings.monoNow());
    watch.keepWatched();
    return true;
  }

  /**
   * Whether a key {@code hasNext()} reserved may still be handed out: time may have passed since (a
   * loop that waits for a quota between {@code hasNext()} and {@code next()}), so its lease is
   * checked again, one send ahead, after renewing what is due; a key whose lease no longer outlasts
   * a send is lapsed, never handed out (another caller may have taken it over and sent).
   */
  private boolean stillLive(Batch.Item item) {
    if (item.claim == null) {
      return true;
    }
    long now = settings.leaseNow();
    long horizonNanos = leases.horizonNanos();
    if (settings.leaseRenewal) {
      leases.renewBefore(now + horizonNanos, claimed);
    }
    if (item.claim.isLive(now, horizonNanos)) {
      return true;
    }
    lapse(item); // unless another iteration handed it out: its send runs, and is renewed
    return false;
  }

  /**
   * Lapses a key not handed out, under the monitor {@code Item.markHandedOut} takes: never one that
   * another iteration handed out, whose send may run (a LAPSED key is no longer renewed).
   */
  private boolean lapse(Batch.Item item) {
    synchronized (item) {
      if (item.handedOut() || !item.state.compareAndSet(Batch.Item.NEW, Batch.Item.LAPSED)) {
        return false;
      }
    }
    lapsed.add(item.key());
    CallEvents.log.debug(
        "Key {} of a batch was not handed out: its lease lapsed, or the guard is closing",
        item.call.keyId);
    return true;
  }
}
