package dev.idempotency.reliability;

import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.ForwardingKeyStore;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.channels.FileChannel;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;

/**
 * A fault-run client's store, which logs every takeover it was granted, and the calls that hold or
 * write a key's claim (claim, renewal, outcome) when one took a quarter lease or more, failed, or
 * was still unanswered when the claim's lease ran out: {@link FaultHistory.StoreCall} lines in
 * {@code store-PROCESS.log}, one per key id, with the attempt of the claim, the end of its lease as
 * this client last asked for it before the call (from the start of the claim or renewal the store
 * granted, as the guard counts it), the call's answer (granted, refused or failed) and the lease
 * end as it stood when the call returned (a renewal granted late still kept the lease from its
 * start, and a takeover before that end took a live lease). A live owner whose renewal or outcome
 * write the store answers only after its lease ran out loses the key as a cut off owner does (the
 * store, the way to it or the client's own threads too slow), with no fault of the nemesis to show
 * for it; these lines show it. Batch calls go to the real store's batch calls, so the client makes
 * the requests it would make without this log. Times are the true wall clock, not the guard's
 * (which a client moves).
 */
final class StoreCallLog extends ForwardingKeyStore {

  private final int process;
  private final long leaseMillis;
  private final FileChannel log;

  /** The attempt and lease end (true wall-clock ms) of every claim granted, by owner token. */
  private final Map<String, long[]> claims = new ConcurrentHashMap<>();

  StoreCallLog(KeyStore delegate, int process, long leaseMillis, FileChannel log) {
    super(delegate);
    this.process = process;
    this.leaseMillis = leaseMillis;
    this.log = log;
  }

  @Override
  public ClaimResult claim(ClaimRequest request) {
    return claimed(List.of(request), () -> List.of(delegate.claim(request))).get(0);
  }

  @Override
  public List<ClaimResult> claimAll(List<ClaimRequest> requests) {
    return claimed(requests, () -> delegate.claimAll(requests));
  }

  private List<ClaimResult> claimed(List<ClaimRequest> requests, Supplier<List<ClaimResult>> call) {
    long start = System.currentTimeMillis();
    List<ClaimResult> results = null;
    try {
      results = call.get();
      for (int i = 0; i < results.size(); i++) {
        if (results.get(i) instanceof ClaimResult.Claimed granted) {
          claims.put(
              requests.get(i).ownerToken(), new long[] {granted.attempt(), start + leaseMillis});
        }
      }
      return results;
    } finally {
      long end = System.currentTimeMillis();
      for (int i = 0; i < requests.size(); i++) {
        long[] claim = claims.get(requests.get(i).ownerToken());
        boolean won = results != null && results.get(i) instanceof ClaimResult.Claimed;
        if (won && ((ClaimResult.Claimed) results.get(i)).takeover()) {
          write("takeover", requests.get(i).keyId(), claim, claim, start, end, false, true);
        } else if (results == null || end - start >= leaseMillis / 4) {
          write("claim", requests.get(i).keyId(), claim, claim, start, end, results == null, won);
        }
      }
    }
  }

  @Override
  public boolean extend(ExtendRequest request) {
    return extended(List.of(request), () -> List.of(delegate.extend(request))).get(0);
  }

  @Override
  public List<Boolean> extendAll(List<ExtendRequest> requests) {
    return extended(requests, () -> delegate.extendAll(requests));
  }

  private List<Boolean> extended(List<ExtendRequest> requests, Supplier<List<Boolean>> call) {
    long start = System.currentTimeMillis();
    long[][] before = leases(requests.stream().map(ExtendRequest::ownerToken).toList());
    List<Boolean> results = null;
    try {
      results = call.get();
      for (int i = 0; i < results.size(); i++) {
        long[] claim = claims.get(requests.get(i).ownerToken());
        if (results.get(i) && claim != null) {
          synchronized (claim) {
            claim[1] = Math.max(claim[1], start + leaseMillis);
          }
        }
      }
      return results;
    } finally {
      long end = System.currentTimeMillis();
      long[][] after = leases(requests.stream().map(ExtendRequest::ownerToken).toList());
      for (int i = 0; i < requests.size(); i++) {
        logIfLate(
            "extend",
            requests.get(i).keyId(),
            before[i],
            after[i],
            start,
            end,
            results == null,
            results != null && results.get(i));
      }
    }
  }

  @Override
  public boolean complete(CompleteRequest request) {
    return completed(List.of(request), () -> List.of(delegate.complete(request))).get(0);
  }

  @Override
  public List<Boolean> completeAll(List<CompleteRequest> requests) {
    return completed(requests, () -> delegate.completeAll(requests));
  }

  private List<Boolean> completed(List<CompleteRequest> requests, Supplier<List<Boolean>> call) {
    long start = System.currentTimeMillis();
    long[][] before = leases(requests.stream().map(CompleteRequest::ownerToken).toList());
    List<Boolean> results = null;
    try {
      results = call.get();
      return results;
    } finally {
      long end = System.currentTimeMillis();
      for (int i = 0; i < requests.size(); i++) {
        // an outcome write keeps no lease: the lease stands as it was
        logIfLate(
            "complete",
            requests.get(i).keyId(),
            before[i],
            before[i],
            start,
            end,
            results == null,
            results != null && results.get(i));
      }
    }
  }

  @Override
  public String kind() {
    return delegate.kind();
  }

  /** A copy of each claim's attempt and lease end as the call starts (null if not known). */
  private long[][] leases(List<String> ownerTokens) {
    long[][] leases = new long[ownerTokens.size()][];
    for (int i = 0; i < leases.length; i++) {
      long[] claim = claims.get(ownerTokens.get(i));
      if (claim != null) {
        synchronized (claim) {
          leases[i] = claim.clone();
        }
      }
    }
    return leases;
  }

  private void logIfLate(
      String operation,
      String keyId,
      long[] claim,
      long[] after,
      long start,
      long end,
      boolean failed,
      boolean granted) {
    if (failed || end - start >= leaseMillis / 4 || (claim != null && end >= claim[1])) {
      write(operation, keyId, claim, after, start, end, failed, granted);
    }
  }

  /**
   * Writes one line: {@code claim} is the claim's attempt and lease end as the call began, {@code
   * after} its lease end as the call returned (either null if the claim is not known).
   */
  private void write(
      String operation,
      String keyId,
      long[] claim,
      long[] after,
      long start,
      long end,
      boolean failed,
      boolean granted) {
    FaultHistory.StoreCall line =
        new FaultHistory.StoreCall(
            operation,
            process,
            keyId,
            claim == null ? 0 : (int) claim[0],
            start,
            end,
            claim == null ? 0 : claim[1],
            failed,
            granted,
            after == null ? 0 : after[1]);
    try {
      FaultRunChild.write(log, line.line(), false);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
