package dev.idempotency;

import dev.idempotency.spi.ExtendRequest;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Renews the leases of one guard's live claims in the background, fenced by their owner tokens (the
 * idea of Redisson's lock watchdog and ShedLock's keep-alive): a short lease then bounds how long a
 * crashed process blocks its keys, while a live sender is never taken over.
 *
 * <ol>
 *   <li>While anything is watched, a round starts every {@link #periodNanos} (a quarter of the
 *       lease, at most a second) on the keeper's own two daemon threads, never on the guard's
 *       blocking-store executor: renewal does not queue behind store traffic, batch writes or the
 *       application's tasks. The next round is scheduled as a round starts, so a round held up by a
 *       slow store does not hold up the next one, which runs on the other thread.
 *   <li>A round asks each watched object for the claims whose last renewal is a quarter of a lease
 *       old on the monotonic clock (a step of the wall clock never drops a claim), skipping those
 *       whose renewal is still under way, and renews them together, one {@code extendAll} per
 *       {@link dev.idempotency.spi.KeyStore#maxBatchSize() chunk}. A round stops starting chunks
 *       after a quarter lease; the rest go to the next round.
 *   <li>Renewals of one claim never overlap, the keeper's and those made on a caller's thread
 *       ({@link #renewNow}) alike: a store sets the lease from each request's own time, so an older
 *       renewal landing after a newer one would move the stored lease back behind the guard's
 *       estimate.
 *   <li>A claim whose renewal the store refuses is marked lost; a failed renewal is retried on the
 *       next round (one made before a send, on a caller's thread, is tried once more at once, and
 *       its claim lost only if that fails too). A renewed lease has at least about half its length
 *       left when the next renewal is due.
 * </ol>
 *
 * When nothing is watched the keeper stops ticking and its threads end after a while, so an idle
 * guard costs nothing. {@link #close()} stops it for good.
 */
final class LeaseKeeper {

  /** Something that owns claims: a single call's {@link Claim}, or a {@link Batch}. */
  interface Watched {
    /**
     * Adds the claims due for renewal to {@code due}. Runs on a keeper thread and must not do store
     * work itself (a batch hands its waiting outcomes to the blocking-store executor).
     *
     * @param nowMono the monotonic time of the round
     * @return {@code false} once it needs no more watching
     */
    boolean collectDue(long nowMono, long renewAfterNanos, List<Claim> due);

    /** The guard is closing: write what can be written now, on the calling thread. */
    default void closing() {}
  }

  private static final Logger log = LoggerFactory.getLogger(LeaseKeeper.class);
  private static final long MAX_PERIOD_NANOS = TimeUnit.SECONDS.toNanos(1);
  private static final long MIN_PERIOD_NANOS = TimeUnit.MILLISECONDS.toNanos(1);
  private static final int THREADS = 2;

  /** Time between rounds: a quarter of the lease, between 1 ms and 1 s. */
  final long periodNanos;

  /** A claim is renewed once its last renewal is this old: a quarter of the lease. */
  final long renewAfterNanos;

  /**
   * The least a lease must have left for a send to start on it, or a batch's key to be handed out:
   * a quarter of the lease, what the keeper needs to renew it in time.
   */
  final long marginNanos;

  private final GuardSettings settings;
  private final Set<Watched> watched = ConcurrentHashMap.newKeySet();
  private final AtomicInteger count = new AtomicInteger();
  private final AtomicBoolean ticking = new AtomicBoolean();
  private final ScheduledThreadPoolExecutor threads;
  private volatile boolean closed;

  /** Orders {@link #watch} (shared) against {@link #close()} (exclusive). */
  private final ReentrantReadWriteLock lifecycle = new ReentrantReadWriteLock();

  LeaseKeeper(GuardSettings settings) {
    this.settings = settings;
    this.renewAfterNanos = settings.leaseNanos / 4;
    this.marginNanos = settings.leaseNanos / 4;
    this.periodNanos = Math.max(MIN_PERIOD_NANOS, Math.min(renewAfterNanos, MAX_PERIOD_NANOS));
    this.threads =
        new ScheduledThreadPoolExecutor(
            THREADS,
            DefaultExecutors.daemonThreads(settings.executors.threadPrefix + "lease-keeper"));
    threads.setKeepAliveTime(30, TimeUnit.SECONDS);
    threads.allowCoreThreadTimeOut(true);
    threads.setRemoveOnCancelPolicy(true);
  }

  /**
   * Starts renewing what {@code owner} reports, until it says it is done or is unwatched.
   *
   * @return {@code false} if {@link #close()} began: the owner is not watched, and its {@link
   *     Watched#closing()} is not called; otherwise it is watched (again or still), and a close
   *     that follows calls its {@code closing()} after this call returned
   */
  boolean watch(Watched owner) {
    lifecycle.readLock().lock();
    try {
      if (closed) {
        return false;
      }
      if (watched.add(owner)) {
        count.incrementAndGet();
        if (!ticking.get() && ticking.compareAndSet(false, true)) {
          scheduleRound();
        }
      }
      return true;
    } finally {
      lifecycle.readLock().unlock();
    }
  }

  void unwatch(Watched owner) {
    if (watched.remove(owner)) {
      count.decrementAndGet();
    }
  }

  /** How many owners are watched; for tests. */
  int watchedCount() {
    return count.get();
  }

  /**
   * Stops renewing: nothing is watched or renewed any more, every owner watched until now writes
   * what it can ({@link Watched#closing()}), and the keeper's threads end. A {@link #watch} either
   * ends before this takes the owners (then its owner's {@code closing()} runs after it) or is
   * refused.
   */
  void close() {
    List<Watched> owners;
    lifecycle.writeLock().lock();
    try {
      closed = true;
      owners = List.copyOf(watched);
      watched.clear();
      count.set(0);
    } finally {
      lifecycle.writeLock().unlock();
    }
    for (Watched owner : owners) {
      try {
        owner.closing();
      } catch (RuntimeException e) {
        log.warn("A lease renewal owner failed to write what it had at close", e);
      }
    }
    threads.shutdownNow();
  }

  /** Whether the guard closed this keeper: nothing it watches is renewed any more. */
  boolean isClosed() {
    return closed;
  }

  private void scheduleRound() {
    try {
      threads.schedule(this::round, periodNanos, TimeUnit.NANOSECONDS);
    } catch (RejectedExecutionException e) {
      ticking.set(false);
      if (!closed) {
        log.warn("Could not schedule lease renewal; leases run out unrenewed", e);
      }
    }
  }

  /** One round: schedule the next, collect the due claims and renew them. */
  void round() {
    if (closed) {
      return;
    }
    if (count.get() == 0) {
      ticking.set(false);
      // A watch() that raced with the check above saw ticking still set: start again for it.
      if (count.get() == 0 || !ticking.compareAndSet(false, true)) {
        return;
      }
    }
    scheduleRound();
    long startMono = System.nanoTime();
    List<Claim> due = new ArrayList<>();
    for (Watched owner : watched) {
      boolean keep = true;
      try {
        keep = owner.collectDue(startMono, renewAfterNanos, due);
      } catch (RuntimeException e) {
        log.warn("A lease renewal owner failed; it stays watched", e);
      }
      if (!keep) {
        unwatch(owner);
      }
    }
    List<Claim> mine = new ArrayList<>(due.size());
    for (Claim claim : due) {
      if (claim.startRenewal()) {
        mine.add(claim);
      }
    }
    renew(mine, false, startMono + renewAfterNanos);
  }

  /**
   * Whether the store answered this claim after more than half its lease (with renewal on): the
   * keeper's rounds, every quarter lease, may then come too late for a send started on what is
   * left, so the claim must be renewed before anything is sent ({@link #renewNow}).
   */
  boolean isLate(Claim claim) {
    return settings.leaseRenewal
        && claim.renewedLongerAgoThan(System.nanoTime(), settings.leaseNanos / 2);
  }

  /**
   * Whether a send may start on this claim now: with renewal on, a claim answered late, or with
   * less than {@link #marginNanos} left, is renewed first on the calling thread, fenced; then it
   * must have more than the margin left. Without renewal, only a claim that is already lost or
   * lapsed is refused.
   */
  boolean readyToSend(Claim claim) {
    if (!settings.leaseRenewal) {
      return !claim.lapsedBy(settings.leaseNow());
    }
    // a claim past its renewal limit (a send that waited that long for a thread) is not renewed
    // again: it sends on what is left, or not at all
    if ((isLate(claim) || !claim.isLive(settings.leaseNow(), marginNanos))
        && claim.withinRenewalLimit(GuardSettings.monoNow())) {
      renewNow(List.of(claim));
    }
    return claim.isLive(settings.leaseNow(), marginNanos);
  }

  /**
   * Renews the late ones of these claims now, on the calling thread, fenced: a claim the store
   * refuses is lost, and if the store fails, every claim of the failed chunk is lost too, so that
   * nothing is sent on a lease nobody could renew. For a batch's chunk.
   */
  void renewLate(List<Claim> claims) {
    List<Claim> late = new ArrayList<>();
    for (Claim claim : claims) {
      if (isLate(claim)) {
        late.add(claim);
      }
    }
    renewNow(late);
  }

  /**
   * Renews these claims now, on the calling thread, fenced; a claim the store refuses, or cannot
   * renew (tried twice), is lost (nothing may be sent on it).
   *
   * <p>A claim whose renewal by the keeper (or another caller) is on its way to the store is
   * renewed once that one has ended, never beside it: each renewal sets the stored lease from its
   * own request time, so an older one landing after this one would move the stored lease back while
   * the claim keeps this one's later deadline, and a key handed out on it could be taken over
   * mid-send. The wait holds no other claim's renewal, so two callers cannot wait for each other.
   */
  void renewNow(List<Claim> claims) {
    renewNow(claims, true);
  }

  /**
   * Renews these claims now, on the calling thread, fenced, as {@link #renewNow} does, for claims
   * whose sends already started (a batch's keys handed out): a claim the store refuses is lost, but
   * a renewal the store fails to answer leaves them as they are, for the keeper to retry. Marked
   * lost, a claim would never be renewed again and its lease would run out under the running send.
   */
  void renewStartedNow(List<Claim> claims) {
    renewNow(claims, false);
  }

  private void renewNow(List<Claim> claims, boolean loseOnFailure) {
    List<Claim> left = claims;
    while (!left.isEmpty()) {
      List<Claim> mine = new ArrayList<>(left.size());
      List<Claim> busy = new ArrayList<>();
      for (Claim claim : left) {
        if (claim.isLost()) {
          continue;
        }
        (claim.startRenewal() ? mine : busy).add(claim);
      }
      renew(mine, loseOnFailure, Long.MAX_VALUE);
      busy.forEach(Claim::awaitNoRenewal);
      left = busy;
    }
  }

  /**
   * Renews the claims, whose renewal flags ({@link Claim#startRenewal}) the caller took, a chunk
   * per store call, starting no chunk once {@code stopStartingAtMono} has passed; ends each claim's
   * renewal exactly once: as soon as its chunk is answered, or, if its chunk is not started or an
   * earlier chunk throws (an {@link Error} from the store too), on the way out. A flag left set
   * would keep the keeper from renewing that claim ever again and make the next {@link #renewNow}
   * of it wait for ever.
   */
  private void renew(List<Claim> due, boolean loseOnFailure, long stopStartingAtMono) {
    int chunk = Math.max(1, settings.store.maxBatchSize());
    int ended = 0;
    try {
      for (int from = 0; from < due.size(); from += chunk) {
        List<Claim> part = due.subList(from, Math.min(due.size(), from + chunk));
        boolean started;
        try {
          started = renewChunk(part, loseOnFailure, stopStartingAtMono);
        } finally {
          part.forEach(Claim::endRenewal);
          ended = from + part.size();
        }
        if (!started) {
          log.debug(
              "The renewal round ran out of time with {} leases to go; the next round takes them",
              due.size() - from);
          return;
        }
      }
    } finally {
      due.subList(ended, due.size()).forEach(Claim::endRenewal);
    }
  }

  /**
   * Renews one chunk; {@code false} if it was not started, {@code stopStartingAtMono} passed. For
   * claims that are lost if it fails ({@code loseOnFailure}: renewals before a send), a failure of
   * the store (not a refusal) is tried once more at once, fenced: a momentary failure is not
   * another owner, and losing the claim would refuse a send, or tell a sender's {@link
   * SendContext#leaseHeld()} check {@code false}, on a key that is still this guard's.
   */
  private boolean renewChunk(List<Claim> part, boolean loseOnFailure, long stopStartingAtMono) {
    long sentAtMono = System.nanoTime();
    if (sentAtMono - stopStartingAtMono > 0) {
      return false;
    }
    Instant now = settings.clock.instant();
    long sentAt = settings.leaseNow(now);
    List<Boolean> extended;
    try {
      extended = extendAll(part, now);
    } catch (RuntimeException e) {
      if (!loseOnFailure) {
        settings.outages.renewalFailed(
            "Could not renew the leases of " + part.size() + " keys; trying again", e);
        return true;
      }
      sentAtMono = System.nanoTime();
      now = settings.clock.instant();
      sentAt = settings.leaseNow(now);
      try {
        extended = extendAll(part, now);
      } catch (RuntimeException again) {
        again.addSuppressed(e);
        log.debug(
            "Could not renew the leases of {} late claims, tried twice; nothing is sent",
            part.size(),
            again);
        // a batch's key handed out meanwhile (on another thread) is sending: the keeper retries it
        part.forEach(Claim::loseUnlessStarted);
        return true;
      }
    }
    settings.outages.renewalSucceeded();
    long tookNanos = System.nanoTime() - sentAtMono;
    if (tookNanos > renewAfterNanos) {
      log.debug(
          "Renewing {} leases took {} ms, more than a quarter of the lease",
          part.size(),
          TimeUnit.NANOSECONDS.toMillis(tookNanos));
    }
    for (int i = 0; i < part.size(); i++) {
      Claim claim = part.get(i);
      if (extended.get(i)) {
        claim.renewed(sentAt, sentAtMono);
      } else {
        claim.lose();
        log.debug("The lease of key {} could not be renewed: it is no longer ours", claim.keyId);
      }
    }
    return true;
  }

  /** One fenced store call renewing the claims' leases from {@code now}, the interrupt deferred. */
  private List<Boolean> extendAll(List<Claim> part, Instant now) {
    List<ExtendRequest> requests = new ArrayList<>(part.size());
    for (Claim claim : part) {
      requests.add(new ExtendRequest(claim.keyId, claim.ownerToken, settings.lease, now));
    }
    return Interrupts.deferredDuring(() -> settings.store.extendAll(requests));
  }
}
