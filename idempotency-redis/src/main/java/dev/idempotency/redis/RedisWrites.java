package dev.idempotency.redis;

import static dev.idempotency.redis.Replies.bytes;

import dev.idempotency.KeyStoreException;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.RecordState;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.function.Function;

/**
 * The owner's fenced writes: complete, release, take-back and extend, each one script call checking
 * the owner token; a batch of them one script call on standalone Redis, one pipeline of single-key
 * calls on a cluster.
 */
final class RedisWrites {

  private final RedisContext redis;

  RedisWrites(RedisContext redis) {
    this.redis = redis;
  }

  CompletableFuture<Boolean> complete(Operation operation, CompleteRequest request) {
    return single(operation, redis.scripts.complete, request.keyId(), completeArgs(request));
  }

  List<Boolean> completeAll(List<CompleteRequest> requests) {
    if (!redis.commands.multiKeyScripts()) {
      return perKey(requests, r -> complete(redis.operation("complete"), r), null);
    }
    return batch(
        "complete a batch",
        redis.scripts.completeBatch,
        requests,
        3,
        RedisWrites::completeArgs,
        CompleteRequest::keyId);
  }

  CompletableFuture<Boolean> release(Operation operation, String keyId, String ownerToken) {
    return single(operation, redis.scripts.release, keyId, new byte[][] {bytes(ownerToken)});
  }

  /**
   * Takes back a claim nothing was sent under: deletes a first attempt, lapses a takeover under a
   * fresh owner token no caller holds, so that no late write of the claim taken back passes the
   * fence.
   */
  CompletableFuture<Boolean> takeBack(Operation operation, String keyId, String ownerToken) {
    return single(
        operation,
        redis.scripts.takeBack,
        keyId,
        new byte[][] {bytes(ownerToken), bytes(endedOwnerToken())});
  }

  /** A random owner token (22 characters, as a claim's), held by no caller. */
  private static String endedOwnerToken() {
    byte[] random = new byte[16];
    java.util.concurrent.ThreadLocalRandom.current().nextBytes(random);
    return java.util.Base64.getUrlEncoder().withoutPadding().encodeToString(random);
  }

  /** Deletes a settled record; never one in progress. */
  CompletableFuture<Boolean> forget(Operation operation, String keyId) {
    return single(operation, redis.scripts.forget, keyId, new byte[0][]);
  }

  /** Reads a record without changing it. */
  CompletableFuture<java.util.Optional<dev.idempotency.spi.StoredRecord>> inspect(
      Operation operation, String keyId) {
    return operation.bounded(
        redis
            .scripts
            .run(operation, redis.scripts.inspect, new String[] {redis.redisKey(keyId)})
            .thenApply(Replies::inspected));
  }

  CompletableFuture<Boolean> extend(Operation operation, ExtendRequest request) {
    return single(operation, redis.scripts.extend, request.keyId(), extendArgs(request));
  }

  List<Boolean> extendAll(List<ExtendRequest> requests) {
    if (!redis.commands.multiKeyScripts()) {
      return perKey(requests, r -> extend(redis.operation("extend"), r), null);
    }
    return batch(
        "extend a batch",
        redis.scripts.extendBatch,
        requests,
        2,
        RedisWrites::extendArgs,
        ExtendRequest::keyId);
  }

  private static byte[][] completeArgs(CompleteRequest request) {
    String state = request.state() == RecordState.COMPLETED ? "C" : "F";
    return new byte[][] {bytes(request.ownerToken()), bytes(state), request.payload()};
  }

  private static byte[][] extendArgs(ExtendRequest request) {
    return new byte[][] {
      bytes(request.ownerToken()), bytes(Long.toString(request.lease().toMillis()))
    };
  }

  /** One key's script call, replying 1 or 0. */
  private CompletableFuture<Boolean> single(
      Operation operation, Scripts.Script script, String keyId, byte[][] args) {
    return operation.bounded(
        redis
            .scripts
            .run(operation, script, new String[] {redis.redisKey(keyId)}, args)
            .thenApply(Replies::flag));
  }

  /** A batch script, {@code width} arguments per key, replying one 1-or-0 per key. */
  private <R> List<Boolean> batch(
      String name,
      Scripts.Script script,
      List<R> requests,
      int width,
      Function<R, byte[][]> argsOf,
      Function<R, String> keyIdOf) {
    String[] keys = new String[requests.size()];
    byte[][] args = new byte[requests.size() * width][];
    for (int i = 0; i < requests.size(); i++) {
      keys[i] = redis.redisKey(keyIdOf.apply(requests.get(i)));
      System.arraycopy(argsOf.apply(requests.get(i)), 0, args, i * width, width);
    }
    Operation operation = redis.operation(name);
    List<Object> replies =
        operation.await(operation.bounded(redis.scripts.run(operation, script, keys, args)));
    List<Boolean> results = new ArrayList<>(replies.size());
    for (Object reply : replies) {
      results.add(Replies.flag(reply));
    }
    return results;
  }

  /**
   * A batch on a cluster: the single-key operations pipelined on the shared connection, each
   * bounded on its own. A key whose operation failed is reported by {@code onFailure} in its slot,
   * or, when that is null, fails the batch.
   */
  static <R, T> List<T> perKey(
      List<R> requests,
      Function<R, CompletionStage<T>> operation,
      Function<KeyStoreException, T> onFailure) {
    List<CompletableFuture<T>> pending = new ArrayList<>(requests.size());
    for (R request : requests) {
      pending.add(operation.apply(request).toCompletableFuture());
    }
    List<T> results = new ArrayList<>(requests.size());
    for (CompletableFuture<T> future : pending) {
      try {
        results.add(future.join());
      } catch (RuntimeException e) {
        Throwable cause = Operation.unwrap(e);
        KeyStoreException failure =
            cause instanceof KeyStoreException k
                ? k
                : new KeyStoreException("Redis store failed a batch operation", cause);
        if (onFailure == null) {
          throw failure;
        }
        results.add(onFailure.apply(failure));
      }
    }
    return results;
  }
}
