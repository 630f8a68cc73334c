package dev.idempotency;

/**
 * A key this guard owns: its owner token and attempt, and the guard's estimate of when its lease
 * ends, kept up to date by the {@link LeaseKeeper}. Times are on {@link GuardSettings#leaseNow()}'s
 * scale. Thread-safe: the caller's thread and the keeper's read and write it.
 */
final class Claim implements LeaseKeeper.Watched {

  final String keyId;
  final String ownerToken;
  final int attempt;
  private final long leaseNanos;
  private volatile long renewedAt;
  private volatile long leaseDeadline;
  private volatile long renewUntil = Long.MAX_VALUE;
  private volatile boolean lost;
  private volatile boolean finished;

  /**
   * A claim the store granted.
   *
   * @param claimedAt when the claim was asked for (the lease runs from no earlier than that)
   */
  Claim(String keyId, String ownerToken, int attempt, long claimedAt, long leaseNanos) {
    this.keyId = keyId;
    this.ownerToken = ownerToken;
    this.attempt = attempt;
    this.leaseNanos = leaseNanos;
    this.renewedAt = claimedAt;
    this.leaseDeadline = claimedAt + leaseNanos;
  }

  /** Renew this claim until {@code until} at the latest (the renewal limit of a send). */
  void renewUntil(long until) {
    this.renewUntil = until;
  }

  /**
   * Whether the lease still has more than {@code marginNanos} to run and was never lost: the test
   * before handing a batch's key out to send.
   */
  boolean isLive(long now, long marginNanos) {
    return !lost && leaseDeadline - now > marginNanos;
  }

  /** Whether the lease was last asked for (claimed or renewed) more than {@code nanos} ago. */
  boolean renewedLongerAgoThan(long now, long nanos) {
    return now - renewedAt > nanos;
  }

  /** Whether the lease ran out (by the guard's estimate) or was lost before {@code now}. */
  boolean lapsedBy(long now) {
    return lost || now - leaseDeadline >= 0;
  }

  /** Whether the keeper should renew now: old enough, inside its limit, not lapsed or lost. */
  boolean dueForRenewal(long now, long renewAfterNanos) {
    return !lost
        && !finished
        && now - renewedAt >= renewAfterNanos
        && now - leaseDeadline < 0
        && now - renewUntil < 0;
  }

  /** The store moved the lease; {@code sentAt} is when the renewal was asked for. */
  void renewed(long sentAt) {
    if (sentAt - renewedAt > 0) {
      renewedAt = sentAt;
      leaseDeadline = sentAt + leaseNanos;
    }
  }

  /** The store refused the renewal: another caller holds the key now, or it is gone. */
  void lose() {
    lost = true;
  }

  boolean isLost() {
    return lost;
  }

  /** The outcome is written or the key released: nothing more to renew. */
  void finish() {
    finished = true;
  }

  @Override
  public boolean collectDue(long now, long renewAfterNanos, java.util.List<Claim> due) {
    if (finished || lost || now - renewUntil >= 0 || now - leaseDeadline >= 0) {
      return false;
    }
    if (dueForRenewal(now, renewAfterNanos)) {
      due.add(this);
    }
    return true;
  }
}
