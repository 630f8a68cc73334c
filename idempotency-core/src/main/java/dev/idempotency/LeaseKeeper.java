package dev.idempotency;

import dev.idempotency.spi.ExtendRequest;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Renews the leases of one guard's live claims in the background, fenced by their owner tokens (the
 * idea of Redisson's lock watchdog and ShedLock's keep-alive): a short lease then bounds how long a
 * crashed process blocks its keys, while a live sender is never taken over.
 *
 * <p>While anything is watched, a round runs every {@link #periodNanos} (a quarter of the lease, at
 * most a second) on the guard's blocking-store executor: each watched object adds the claims whose
 * last renewal is a quarter of a lease old, and those are renewed together, one {@code extendAll}
 * per {@link dev.idempotency.spi.KeyStore#maxBatchSize() chunk}. So a renewed lease always has at
 * least about half its length left. A claim whose renewal the store refuses is marked lost; a
 * failed round is retried on the next one. When nothing is watched the keeper stops ticking, so an
 * idle guard costs nothing and can be collected.
 */
final class LeaseKeeper {

  /** Something that owns claims: a single call's {@link Claim}, or a {@link Batch}. */
  interface Watched {
    /**
     * Adds the claims due for renewal to {@code due}. Runs on a store thread and may do store work
     * of its own first (a batch writes outcomes that waited long enough).
     *
     * @return {@code false} once it needs no more watching
     */
    boolean collectDue(long now, long renewAfterNanos, List<Claim> due);
  }

  private static final Logger log = LoggerFactory.getLogger(LeaseKeeper.class);
  private static final long MAX_PERIOD_NANOS = TimeUnit.SECONDS.toNanos(1);
  private static final long MIN_PERIOD_NANOS = TimeUnit.MILLISECONDS.toNanos(1);

  /** Time between rounds: a quarter of the lease, between 1 ms and 1 s. */
  final long periodNanos;

  /** A claim is renewed once its last renewal is this old: a quarter of the lease. */
  final long renewAfterNanos;

  private final GuardSettings settings;
  private final Set<Watched> watched = ConcurrentHashMap.newKeySet();
  private final AtomicInteger count = new AtomicInteger();
  private final AtomicBoolean ticking = new AtomicBoolean();

  LeaseKeeper(GuardSettings settings) {
    this.settings = settings;
    this.renewAfterNanos = settings.leaseNanos / 4;
    this.periodNanos = Math.max(MIN_PERIOD_NANOS, Math.min(renewAfterNanos, MAX_PERIOD_NANOS));
  }

  /** Starts renewing what {@code owner} reports, until it says it is done or is unwatched. */
  void watch(Watched owner) {
    if (watched.add(owner)) {
      count.incrementAndGet();
      if (!ticking.get() && ticking.compareAndSet(false, true)) {
        scheduleRound();
      }
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

  private void scheduleRound() {
    try {
      DefaultExecutors.scheduler().schedule(this::dispatch, periodNanos, TimeUnit.NANOSECONDS);
    } catch (RejectedExecutionException e) {
      ticking.set(false);
      log.warn("Could not schedule lease renewal; leases run out unrenewed", e);
    }
  }

  /** On the scheduler's thread: hands the round to a store thread, never doing store work here. */
  private void dispatch() {
    try {
      settings.blockingStoreExecutor.execute(this::round);
    } catch (RejectedExecutionException e) {
      log.warn("The blocking store executor refused a lease renewal round; trying again later", e);
      scheduleRound();
    }
  }

  /** One round: collect the due claims and renew them; stop ticking when nothing is watched. */
  void round() {
    if (count.get() == 0) {
      ticking.set(false);
      // A watch() that raced with the check above saw ticking still set: start again for it.
      if (count.get() == 0 || !ticking.compareAndSet(false, true)) {
        return;
      }
    }
    try {
      long now = settings.leaseNow();
      List<Claim> due = new ArrayList<>();
      for (Watched owner : watched) {
        boolean keep = true;
        try {
          keep = owner.collectDue(now, renewAfterNanos, due);
        } catch (RuntimeException e) {
          log.warn("A lease renewal owner failed; it stays watched", e);
        }
        if (!keep) {
          unwatch(owner);
        }
      }
      renew(due, false);
    } finally {
      scheduleRound();
    }
  }

  /**
   * Whether the store answered this claim after more than half its lease (with renewal on): the
   * keeper's rounds, every quarter lease, may then come too late for a send started on what is
   * left, so the claim must be renewed before anything is sent ({@link #renewLate}).
   */
  boolean isLate(Claim claim, long now) {
    return settings.leaseRenewal && claim.renewedLongerAgoThan(now, settings.leaseNanos / 2);
  }

  /**
   * Renews the late ones of these claims now, on the calling thread, fenced: a claim the store
   * refuses is lost, and if the store fails, every claim of the failed chunk is lost too, so that
   * nothing is sent on a lease nobody could renew. For a single call's claim and a batch's chunk.
   */
  void renewLate(List<Claim> claims) {
    long now = settings.leaseNow();
    List<Claim> late = new ArrayList<>();
    for (Claim claim : claims) {
      if (isLate(claim, now)) {
        late.add(claim);
      }
    }
    if (!late.isEmpty()) {
      renew(late, true);
    }
  }

  private void renew(List<Claim> due, boolean loseOnFailure) {
    int chunk = Math.max(1, settings.store.maxBatchSize());
    for (int from = 0; from < due.size(); from += chunk) {
      List<Claim> part = due.subList(from, Math.min(due.size(), from + chunk));
      Instant now = settings.clock.instant();
      long sentAt = settings.leaseNow(now);
      List<ExtendRequest> requests = new ArrayList<>(part.size());
      for (Claim claim : part) {
        requests.add(new ExtendRequest(claim.keyId, claim.ownerToken, settings.lease, now));
      }
      List<Boolean> extended;
      try {
        extended = settings.store.extendAll(requests);
      } catch (RuntimeException e) {
        if (loseOnFailure) {
          log.debug(
              "Could not renew the leases of {} late claims; nothing is sent", part.size(), e);
          part.forEach(Claim::lose);
        } else {
          log.warn(
              "Could not renew the leases of {} keys; trying again in the next round",
              part.size(),
              e);
        }
        continue;
      }
      for (int i = 0; i < part.size(); i++) {
        Claim claim = part.get(i);
        if (extended.get(i)) {
          claim.renewed(sentAt);
        } else {
          claim.lose();
          log.debug("The lease of key {} could not be renewed: it is no longer ours", claim.keyId);
        }
      }
    }
  }
}
