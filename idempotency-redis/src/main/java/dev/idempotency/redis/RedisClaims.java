package dev.idempotency.redis;

import static dev.idempotency.redis.Replies.bytes;

import dev.idempotency.KeyStoreException;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import io.lettuce.core.SetArgs;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The claim: one {@code SET key record NX GET PX window}, which writes the in-progress record if
 * the key is absent and returns the record there otherwise; the claim script only when that record
 * is in progress (or on Redis before 7.0); a batch as one script call on standalone Redis and one
 * pipeline on a cluster; and, if asked, the {@code WAIT} for replicas after a claim.
 */
final class RedisClaims {

  private static final Logger log = LoggerFactory.getLogger(RedisKeyStore.class);
  private static final byte[] ONE = bytes("1");
  private static final byte[] ZERO = bytes("0");
  private static final int ARGS_PER_KEY = 6;

  private final RedisContext redis;
  private final RedisWrites writes;
  private final boolean setGetClaims;
  private final int replicasToWaitFor;
  private final Duration replicaTimeout;

  RedisClaims(
      RedisContext redis,
      RedisWrites writes,
      boolean setGetClaims,
      int replicasToWaitFor,
      Duration replicaTimeout) {
    this.redis = redis;
    this.writes = writes;
    this.setGetClaims = setGetClaims;
    this.replicasToWaitFor = replicasToWaitFor;
    this.replicaTimeout = replicaTimeout;
  }

  CompletableFuture<ClaimResult> claim(Operation operation, ClaimRequest request) {
    if (!setGetClaims) {
      return claim(operation, request, false);
    }
    Boolean setNxGet = redis.commands.setNxGetIfConnected();
    if (setNxGet != null) {
      return claim(operation, request, setNxGet);
    }
    // not connected yet: the claim path depends on the server's version
    return operation.bounded(
        redis.commands.setNxGet().thenCompose(useSetGet -> claim(operation, request, useSetGet)));
  }

  private CompletableFuture<ClaimResult> claim(
      Operation operation, ClaimRequest request, boolean useSetGet) {
    String key = redis.redisKey(request.keyId());
    byte[] record = newRecord(request);
    CompletableFuture<ClaimResult> fast =
        useSetGet
            ? operation
                .send(() -> redis.commands.setGet(key, record, setArgs(request)))
                .thenApply(Replies::settledOrClaimed)
            : CompletableFuture.completedFuture(null);
    CompletableFuture<ClaimResult> result =
        fast.thenCompose(
            settled ->
                settled != null
                    ? CompletableFuture.completedFuture(settled)
                    : redis
                        .scripts
                        .run(
                            operation,
                            redis.scripts.claim,
                            new String[] {key},
                            claimArgs(request, record))
                        .thenApply(Replies::claimResult));
    if (replicasToWaitFor > 0) {
      result =
          result.thenCompose(
              claimed ->
                  claimed instanceof ClaimResult.Claimed
                      ? replicated(operation, key, List.of(request)).thenApply(ignored -> claimed)
                      : CompletableFuture.completedFuture(claimed));
    }
    return operation.bounded(result);
  }

  /**
   * Claims a batch: on standalone Redis in one script call for the whole batch (and one {@code
   * WAIT} if replicas are waited for), which claims each new key with one {@code SET NX GET} where
   * the server takes it; on a cluster, where keys live in different slots, as one pipeline of
   * single-key claims.
   */
  List<ClaimResult> claimAll(List<ClaimRequest> requests) {
    if (!redis.commands.multiKeyScripts()) {
      return RedisWrites.perKey(
          requests, request -> claim(redis.operation("claim"), request), ClaimResult.Failed::new);
    }
    Operation operation = redis.operation("claim a batch");
    String[] keys = new String[requests.size()];
    byte[][] args = new byte[1 + requests.size() * ARGS_PER_KEY][];
    args[0] = setGetClaims && setNxGet(operation) ? ONE : ZERO;
    for (int i = 0; i < requests.size(); i++) {
      ClaimRequest request = requests.get(i);
      keys[i] = redis.redisKey(request.keyId());
      System.arraycopy(
          claimArgs(request, newRecord(request)), 0, args, 1 + i * ARGS_PER_KEY, ARGS_PER_KEY);
    }
    List<ClaimResult> results = new ArrayList<>(requests.size());
    List<ClaimRequest> claimed = new ArrayList<>();
    for (Object reply :
        operation.await(
            operation.bounded(
                redis.scripts.run(operation, redis.scripts.claimBatch, keys, args)))) {
      ClaimResult result;
      try {
        result = Replies.batchClaimResult(reply);
      } catch (dev.idempotency.UnreadableRecordException unreadable) {
        result = new ClaimResult.Failed(unreadable); // that key's error: the others were claimed
      }
      if (result instanceof ClaimResult.Claimed) {
        claimed.add(requests.get(results.size()));
      }
      results.add(result);
    }
    if (replicasToWaitFor > 0 && !claimed.isEmpty()) {
      Operation waiting = redis.operation("wait for replicas");
      try {
        waiting.await(waiting.bounded(replicated(waiting, keys[0], claimed)));
      } catch (KeyStoreException e) {
        results.replaceAll(
            result -> result instanceof ClaimResult.Claimed ? new ClaimResult.Failed(e) : result);
      }
    }
    return results;
  }

  /** Whether the server takes {@code SET NX GET}, connecting first if need be. */
  private boolean setNxGet(Operation operation) {
    Boolean known = redis.commands.setNxGetIfConnected();
    return known != null ? known : operation.await(operation.bounded(redis.commands.setNxGet()));
  }

  /** {@code SET key record NX GET PX window}. */
  private static SetArgs setArgs(ClaimRequest request) {
    return SetArgs.Builder.nx().px(request.retention().toMillis());
  }

  private static byte[] newRecord(ClaimRequest request) {
    return RecordValue.inProgress(
        request.ownerToken(),
        request.fingerprint(),
        request.lease().toMillis(),
        request.retention().toMillis(),
        request.debugKey());
  }

  private static byte[][] claimArgs(ClaimRequest request, byte[] record) {
    return new byte[][] {
      record,
      bytes(Long.toString(request.retention().toMillis())),
      bytes(Long.toString(request.lease().toMillis())),
      request.takeOverExpiredLease() ? ONE : ZERO,
      bytes(request.ownerToken()),
      bytes(request.fingerprint())
    };
  }

  /**
   * Waits ({@code WAIT}) until enough replicas acknowledged the claims, on the connection that
   * wrote them; if too few did, releases them and fails once the releases are done (so a caller who
   * retries at once finds the keys free), and nothing is sent.
   */
  private CompletableFuture<Void> replicated(
      Operation operation, String key, List<ClaimRequest> claimed) {
    return operation
        .send(
            () ->
                redis.commands.waitForReplication(
                    key, replicasToWaitFor, replicaTimeout.toMillis()))
        .handle((acknowledged, error) -> error == null ? acknowledged : -1L)
        .thenCompose(
            acknowledged -> {
              if (acknowledged >= replicasToWaitFor) {
                return CompletableFuture.completedFuture(null);
              }
              CompletableFuture<?>[] releases =
                  claimed.stream()
                      .map(
                          request ->
                              writes
                                  .release(
                                      redis.operation("release"),
                                      request.keyId(),
                                      request.ownerToken())
                                  .exceptionally(
                                      error -> {
                                        log.debug(
                                            "Could not release a claim replicas did not"
                                                + " acknowledge",
                                            error);
                                        return false;
                                      }))
                      .toArray(CompletableFuture<?>[]::new);
              KeyStoreException unacknowledged =
                  new KeyStoreException(
                      "Redis store: the claim was acknowledged by "
                          + Math.max(acknowledged, 0)
                          + " of "
                          + replicasToWaitFor
                          + " replicas within "
                          + replicaTimeout.toMillis()
                          + " ms; released it, nothing was sent",
                      null);
              return CompletableFuture.allOf(releases)
                  .thenCompose(done -> CompletableFuture.<Void>failedFuture(unacknowledged));
            });
  }
}
