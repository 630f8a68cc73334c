package dev.idempotency.benchmarks.http;

import dev.idempotency.redis.RedisKeyStore;
import dev.idempotency.redis.StoreConnection;
import dev.idempotency.spi.KeyStore;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.SetArgs;
import io.lettuce.core.api.async.RedisAsyncCommands;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Base64;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Supplier;

/**
 * The floor under {@code /guarded} on Redis: only what any guard that stores results must do, with
 * Lettuce directly on the very connection the SDK's store uses ({@link StoreConnection}), and no
 * SDK code. A first send is the same two commands as the store's: {@code SET key claim NX GET PX}
 * (the claim), the work, then one {@code EVALSHA} that writes the answer if the claim is still
 * there (a fenced write: {@code GET}, compare, {@code SET ... KEEPTTL}). A replay is the one {@code
 * SET ... NX GET}, which returns the stored answer. No key hashing, no fingerprint, no record
 * format beyond a state byte, no time bound, no lease: what it leaves out is what the SDK adds.
 */
final class RedisFloor {

  /** The fenced write of the answer: the least a guard that stores results must do. */
  static final String COMPLETE =
      "if redis.call('GET', KEYS[1]) == ARGV[1] then "
          + "redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL') return 1 end return 0";

  private static final SetArgs CLAIM = SetArgs.Builder.nx().px(Duration.ofHours(24));
  private static final long TIMEOUT_SECONDS = 10;

  /** An answer: its status and body, and whether it was replayed. */
  record Answer(int status, String body, boolean replayed) {}

  private final KeyStore store;
  private volatile RedisAsyncCommands<String, byte[]> redis;
  private volatile String sha;

  RedisFloor(KeyStore store) {
    this.store = store;
  }

  /** Opens the connection and loads the script now, if the store is Redis (at start-up). */
  void openIfRedis() {
    if (store instanceof RedisKeyStore) {
      commands();
    }
  }

  /** Spring MVC: each command waited for on the request thread, the work run there too. */
  Answer callBlocking(String key, Supplier<String> work) {
    RedisAsyncCommands<String, byte[]> commands = commands();
    byte[] claim = claim();
    String redisKey = "floor:" + key;
    byte[] previous = await(commands.setGet(redisKey, claim, CLAIM).toCompletableFuture());
    if (previous != null) {
      return replay(previous);
    }
    String answer = work.get();
    Long written = await(complete(commands, redisKey, claim, answer));
    return written(written, answer);
  }

  /**
   * WebFlux: the next step runs where Lettuce completes the command (its event loop), the least
   * number of thread hand-overs there is.
   */
  CompletableFuture<Answer> callAsync(String key, Supplier<String> work) {
    RedisAsyncCommands<String, byte[]> commands = commands();
    byte[] claim = claim();
    String redisKey = "floor:" + key;
    return commands
        .setGet(redisKey, claim, CLAIM)
        .toCompletableFuture()
        .thenCompose(
            previous -> {
              if (previous != null) {
                return CompletableFuture.completedFuture(replay(previous));
              }
              String answer = work.get();
              return complete(commands, redisKey, claim, answer)
                  .thenApply(written -> written(written, answer));
            });
  }

  private CompletableFuture<Long> complete(
      RedisAsyncCommands<String, byte[]> commands, String redisKey, byte[] claim, String answer) {
    byte[] stored = ("C" + answer).getBytes(StandardCharsets.UTF_8);
    return commands
        .<Long>evalsha(sha, ScriptOutputType.INTEGER, new String[] {redisKey}, claim, stored)
        .toCompletableFuture();
  }

  private static Answer written(Long written, String answer) {
    if (written == null || written != 1L) {
      throw new IllegalStateException("the floor's claim was gone when its answer was written");
    }
    return new Answer(200, answer, false);
  }

  private static Answer replay(byte[] previous) {
    if (previous.length > 0 && previous[0] == 'C') {
      return new Answer(
          200, new String(previous, 1, previous.length - 1, StandardCharsets.UTF_8), true);
    }
    return new Answer(409, "{\"in_progress\":true}", false);
  }

  /** An in-progress value: a state byte and a random 22-character token, as the store's claims. */
  private static byte[] claim() {
    byte[] random = new byte[16];
    ThreadLocalRandom.current().nextBytes(random);
    return ("I" + Base64.getUrlEncoder().withoutPadding().encodeToString(random))
        .getBytes(StandardCharsets.US_ASCII);
  }

  private RedisAsyncCommands<String, byte[]> commands() {
    RedisAsyncCommands<String, byte[]> commands = redis;
    return commands != null ? commands : open();
  }

  /** Once, on the first request: the store's connection, and the script loaded. */
  private synchronized RedisAsyncCommands<String, byte[]> open() {
    if (redis == null) {
      if (!(store instanceof RedisKeyStore redisStore)) {
        throw new IllegalStateException("/floor needs idempotency.store=redis");
      }
      RedisAsyncCommands<String, byte[]> commands = StoreConnection.of(redisStore).async();
      sha = await(commands.scriptLoad(COMPLETE).toCompletableFuture());
      redis = commands;
    }
    return redis;
  }

  private static <T> T await(CompletableFuture<T> future) {
    try {
      return future.get(TIMEOUT_SECONDS, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    } catch (ExecutionException | TimeoutException e) {
      throw new IllegalStateException("the floor's Redis command failed", e);
    }
  }
}
