package dev.idempotency.spi;

import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * Stores one idempotency record per key id and changes it atomically.
 *
 * <h2>Obligations</h2>
 *
 * <ol>
 *   <li><b>Atomic claim.</b> {@link #claim} is one atomic step per key id (a unique constraint, a
 *       compare-and-set, a Lua script): however many callers, threads or processes race, exactly
 *       one of them gets {@link ClaimResult.Claimed} for a free key. Within that step:
 *       <ul>
 *         <li>no record, or a record whose retention deadline is at or before now: write a new
 *             {@code IN_PROGRESS} record with the request's owner token and fingerprint, attempt 1,
 *             {@code createdAt = now}, {@code leaseDeadline = now + lease}, {@code
 *             retentionDeadline = now + retention}; return {@code Claimed(1, false)};
 *         <li>an {@code IN_PROGRESS} record whose lease deadline is at or before now, when {@link
 *             ClaimRequest#takeOverExpiredLease()} is set and the fingerprints are equal: replace
 *             the owner token, increment the attempt, set {@code leaseDeadline = now + lease} and
 *             {@code retentionDeadline = max(retentionDeadline, leaseDeadline)} (a lease never
 *             outlives its record, even past the window), keep {@code createdAt}; return {@code
 *             Claimed(attempt, true)};
 *         <li>otherwise change nothing and return {@link ClaimResult.Existing} with the record and
 *             whether its lease has expired.
 *       </ul>
 *   <li><b>Fenced writes.</b> {@link #complete}, {@link #release} and {@link #extend} change the
 *       record only if it still holds the given owner token and is {@code IN_PROGRESS}. A caller
 *       that lost its claim to a takeover can neither overwrite, delete nor keep alive the new
 *       owner's record; it gets {@code false}. One exception keeps retries safe: a {@link
 *       #complete} repeated by the owner that wrote the record's outcome, with the same state and
 *       payload, returns {@code true} and changes nothing (its first reply was lost).
 *   <li><b>Lease renewal.</b> {@link #extend} of a record that is {@code IN_PROGRESS}, holds the
 *       owner token and has not ended sets {@code leaseDeadline = now + lease} and {@code
 *       retentionDeadline = max(retentionDeadline, leaseDeadline)}, and changes nothing else: a
 *       renewing owner's record lives at least one lease beyond now, even past the window, so that
 *       a send longer than its window is never claimed afresh under its live owner. It works on a
 *       lease that has passed but was not taken over (the token still fences it); it never brings
 *       back a record that has ended, was released or completed.
 *   <li><b>Byte-exact payloads.</b> Payloads up to {@link #maxPayloadBytes()} are returned exactly
 *       as written, including empty and binary ones.
 *   <li><b>Bounded growth.</b> Records past their retention deadline count as absent and are
 *       removed on purpose (expiry, a purge), so the store never grows without bound.
 *   <li><b>Time.</b> Deadlines are computed from {@link ClaimRequest#now()} unless {@link
 *       #usesServerTime()} says the store takes time from its own server, which protects leases
 *       against clock skew between application hosts. Stores keep whole milliseconds.
 *   <li><b>Errors.</b> A failure of the backing store is thrown as {@link
 *       dev.idempotency.KeyStoreException}; after a failed {@code claim} the caller assumes it owns
 *       nothing and sends nothing. A claim that failed may still have been applied (it timed out on
 *       a stalled server that runs it later, or its answer was lost): the guard then calls {@link
 *       #takeBack} with that claim's owner token, in the background and more than once, so a
 *       take-back must change only a record still {@code IN_PROGRESS} under that very token, and
 *       answer {@code false} for a key it does not hold.
 *   <li><b>Take-back.</b> {@link #takeBack} of a claim nothing was sent under leaves the store as
 *       if that claim had lapsed: a record the claim created (attempt 1) is deleted; a record it
 *       took over (attempt n &gt; 1) stays {@code IN_PROGRESS} with attempt n and a lease that has
 *       already passed, so that the next claim takes it over at once as attempt n+1, reported as a
 *       takeover (the first owner's send may still run), and a strict claim reports its lease as
 *       expired. It never erases the trace of an earlier attempt. A take-back also ends the claim's
 *       ownership: the kept record's owner token is replaced by a fresh value no caller holds, so
 *       no later {@code extend}, {@code complete} or {@code release} under the old token (a renewal
 *       already on its way when the take-back landed) can change it again.
 * </ol>
 *
 * <p>Implementations must be safe for use by many threads at once. Key ids are digests of at most
 * {@link ClaimRequest#MAX_KEY_ID_LENGTH} characters of {@code [A-Za-z0-9_-]}; stores never see raw
 * keys unless the user opted into {@link ClaimRequest#debugKey() debug keys}.
 */
public interface KeyStore {

  /** The default largest payload a store accepts: 4 MiB. */
  int DEFAULT_MAX_PAYLOAD_BYTES = 4 * 1024 * 1024;

  /** The default largest batch: 1,000 keys. */
  int DEFAULT_MAX_BATCH_SIZE = 1_000;

  /**
   * Claims the key id, or returns the record that prevents it, in one atomic step.
   *
   * @param request the claim; never null
   * @return {@link ClaimResult.Claimed} if the caller now owns the key, else {@link
   *     ClaimResult.Existing}
   * @throws dev.idempotency.KeyStoreException if the store failed; nothing was claimed then
   */
  ClaimResult claim(ClaimRequest request);

  /**
   * Writes the outcome of a claim, fenced by its owner token. The retention deadline is not
   * changed.
   *
   * @param request the outcome; never null
   * @return {@code true} if written, or if this owner already wrote this very outcome (same state
   *     and payload); {@code false} if the record no longer holds the owner token (taken over,
   *     expired or released) or holds another outcome
   * @throws dev.idempotency.KeyStoreException if the store failed
   */
  boolean complete(CompleteRequest request);

  /**
   * Deletes the record so that the next claim starts afresh, fenced by the owner token.
   *
   * @param keyId the record's key id
   * @param ownerToken the token of the claim being released
   * @return {@code true} if deleted; {@code false} if the record no longer holds the owner token
   * @throws dev.idempotency.KeyStoreException if the store failed
   */
  boolean release(String keyId, String ownerToken);

  /**
   * Takes back a claim under which nothing was sent, fenced by its owner token, leaving the store
   * as if that claim had lapsed (obligation 7). The guard calls it for a claim it gave up on before
   * its send: a claim that failed though the store may have applied it (in the background, more
   * than once, over a lease), and a granted claim whose send cannot start. In one atomic step, and
   * only for a record still {@code IN_PROGRESS} under {@code ownerToken}:
   *
   * <ul>
   *   <li>attempt 1 (the claim created the record): delete it, exactly as {@link #release} does;
   *   <li>a later attempt (the claim took over a lapsed lease, whose owner may still be sending):
   *       keep the record, its attempt, fingerprint and window, set {@code leaseDeadline =
   *       min(leaseDeadline, now)}, and replace its owner token by a fresh value no caller holds,
   *       in the same atomic write. The claim taken back then owns nothing: an {@link #extend},
   *       {@link #complete} or {@link #release} under {@code ownerToken} that reaches the store
   *       afterwards (a renewal sent before the take-back) returns {@code false} and changes
   *       nothing, so it cannot give the record a live lease again. The next claim takes it over at
   *       once as the next attempt ({@code Claimed(n + 1, true)}), and a strict claim gets {@code
   *       Existing(record, leaseExpired = true)}, as after a lease that ran out.
   * </ul>
   *
   * <p>A record under another token, completed, failed or absent is left alone. Repeating a
   * take-back changes nothing more. The default calls {@link #release}, which deletes a taken-over
   * record too: a weaker behaviour, kept for stores written before this method, under which the
   * next caller after such a take-back claims afresh as attempt 1 with no takeover reported. Stores
   * should override it.
   *
   * @param keyId the record's key id
   * @param ownerToken the token of the claim being taken back
   * @param now the guard's time; ignored by stores that use server time
   * @return {@code true} if the record held the token and was deleted, or keeps a lease that has
   *     passed under a token no caller holds; {@code false} if the record does not hold the owner
   *     token (a repeated take-back of a takeover among them)
   * @throws dev.idempotency.KeyStoreException if the store failed
   */
  default boolean takeBack(String keyId, String ownerToken, Instant now) {
    return release(keyId, ownerToken);
  }

  /**
   * Renews a claim's lease, fenced by its owner token: the guard calls it while a sender runs, so
   * that a short lease bounds how long a crashed process blocks its keys while a live sender is
   * never taken over. See obligation 3 in the class documentation.
   *
   * @param request the renewal; never null
   * @return {@code true} if the lease was moved; {@code false} if the record no longer holds the
   *     owner token, is no longer {@code IN_PROGRESS}, or is past its window
   * @throws dev.idempotency.KeyStoreException if the store failed
   */
  boolean extend(ExtendRequest request);

  /**
   * Reads the record of a key id without changing it, for operators ("was this sent, when, at which
   * attempt?"). A record past its window (by the store's time: {@code now} for a store on request
   * time) counts as absent.
   *
   * @param keyId the record's key id
   * @param now the guard's time; ignored by stores that use server time
   * @return the record, or empty if there is none
   * @throws UnsupportedOperationException if this store cannot read single records (the default)
   * @throws dev.idempotency.KeyStoreException if the store failed
   */
  default Optional<StoredRecord> find(String keyId, Instant now) {
    throw new UnsupportedOperationException(
        getClass().getName() + " cannot read single records (KeyStore.find)");
  }

  /**
   * Deletes a settled record ({@link RecordState#COMPLETED} or {@link RecordState#FAILED}) so that
   * the next claim of its key starts afresh: an operator's deliberate resend. Atomically refuses a
   * record in progress, whose owner may be sending right now.
   *
   * @param keyId the record's key id
   * @param now the guard's time; ignored by stores that use server time
   * @return {@code true} if a settled record was deleted; {@code false} if there was none (or only
   *     one past its window) or it is in progress
   * @throws UnsupportedOperationException if this store cannot delete single records (the default)
   * @throws dev.idempotency.KeyStoreException if the store failed
   */
  default boolean delete(String keyId, Instant now) {
    throw new UnsupportedOperationException(
        getClass().getName() + " cannot delete single records (KeyStore.delete)");
  }

  /**
   * Renews many leases, each exactly as {@link #extend} would, in as few round trips as the store
   * allows. The default renews one at a time.
   *
   * @param requests at most {@link #maxBatchSize()} renewals with distinct key ids
   * @return one result per request, in request order: whether the lease was moved
   * @throws dev.idempotency.KeyStoreException if the batch failed; none may be assumed moved
   */
  default List<Boolean> extendAll(List<ExtendRequest> requests) {
    List<Boolean> results = new ArrayList<>(requests.size());
    for (ExtendRequest request : requests) {
      results.add(extend(request));
    }
    return results;
  }

  /**
   * Claims many keys, each exactly as {@link #claim} would, in as few round trips as the store
   * allows. The default claims one key at a time. A store that overrides it keeps every per-key
   * guarantee of {@link #claim}; a key whose claim failed is reported as {@link ClaimResult.Failed}
   * in its slot rather than failing the others.
   *
   * @param requests at most {@link #maxBatchSize()} requests with distinct key ids
   * @return one result per request, in request order
   * @throws dev.idempotency.KeyStoreException if the whole batch failed (nothing was claimed)
   */
  default List<ClaimResult> claimAll(List<ClaimRequest> requests) {
    List<ClaimResult> results = new ArrayList<>(requests.size());
    for (ClaimRequest request : requests) {
      try {
        results.add(claim(request));
      } catch (dev.idempotency.KeyStoreException e) {
        results.add(new ClaimResult.Failed(e));
      }
    }
    return results;
  }

  /**
   * Writes many outcomes, each exactly as {@link #complete} would (fenced by its owner token), in
   * as few round trips as the store allows. The default writes one at a time. A store that
   * overrides it reports a key whose record it cannot read (where {@link #complete} throws {@link
   * dev.idempotency.UnreadableRecordException}) as not written in its slot rather than failing the
   * others; if it throws {@code UnreadableRecordException} instead, the guard writes that batch
   * again one key at a time.
   *
   * @param requests at most {@link #maxBatchSize()} outcomes with distinct key ids
   * @return one result per request, in request order: whether it was written
   * @throws dev.idempotency.KeyStoreException if the batch failed; none may be assumed written
   */
  default List<Boolean> completeAll(List<CompleteRequest> requests) {
    List<Boolean> results = new ArrayList<>(requests.size());
    for (CompleteRequest request : requests) {
      results.add(complete(request));
    }
    return results;
  }

  /**
   * The most requests one {@link #claimAll}, {@link #completeAll} or {@link #extendAll} call takes;
   * the guard splits larger batches. Default {@value #DEFAULT_MAX_BATCH_SIZE}.
   *
   * @return a positive number
   */
  default int maxBatchSize() {
    return DEFAULT_MAX_BATCH_SIZE;
  }

  /**
   * The largest payload this store accepts. The guard stores a larger result as "sent, result not
   * stored" instead of failing after the send.
   *
   * @return a positive number of bytes
   */
  default int maxPayloadBytes() {
    return DEFAULT_MAX_PAYLOAD_BYTES;
  }

  /**
   * A short, low-cardinality name of this kind of store, for metrics tags and logs: {@code memory},
   * {@code jdbc}, {@code redis}. Default: the class's simple name in lower case.
   *
   * @return the kind
   */
  default String kind() {
    return getClass().getSimpleName().toLowerCase(java.util.Locale.ROOT);
  }

  /**
   * Whether this store takes lease and retention time from its own server and ignores {@link
   * ClaimRequest#now()} and {@link CompleteRequest#now()}.
   *
   * @return {@code true} for server time, {@code false} (the default) for the request's time
   */
  default boolean usesServerTime() {
    return false;
  }
}
