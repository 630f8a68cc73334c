package dev.idempotency.benchmarks;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.redis.RedisKeyStore;
import dev.idempotency.testservers.FreePorts;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.SetArgs;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import java.time.Duration;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import redis.embedded.RedisServer;

/**
 * Server-side cost per command, from {@code INFO commandstats} ({@code usec_per_call}): 20,000
 * first sends and 20,000 replays through the guard, beside the floor's {@code SET NX PX}, {@code
 * SET KEEPTTL} and {@code GET}, and beside the smallest possible script (one that only {@code
 * GET}s), which is what any script-based claim costs at least. Each is measured in its own phase,
 * after a {@code CONFIG RESETSTAT}, because the guard's scripts run {@code SET} and {@code GET}
 * inside them too.
 *
 * <pre>
 * java -cp benchmarks/target/benchmarks.jar dev.idempotency.benchmarks.RedisServerCost
 * java -cp benchmarks/target/benchmarks.jar dev.idempotency.benchmarks.RedisServerCost 127.0.0.1:26379
 * </pre>
 *
 * With no argument it starts the embedded Redis the tests use; with {@code host:port} it measures
 * that server instead (the peers harness's Debian Redis, for instance), resetting its statistics
 * and leaving its keys ({@code g:*}, {@code f:*}, the guard's prefix) behind.
 */
public final class RedisServerCost {

  private static final int N = 20_000;
  private static final String RESULT = "n_0123456789abcd";

  private RedisServerCost() {}

  /**
   * Measures and prints.
   *
   * @param args nothing, or the {@code host:port} of a running server to measure
   */
  public static void main(String[] args) {
    RedisServer server = null;
    String address;
    if (args.length == 0) {
      int port = FreePorts.next();
      server = Backend.startRedis(port);
      address = "127.0.0.1:" + port;
    } else {
      address = args[0];
    }
    RedisClient client = RedisClient.create(RedisURI.create("redis://" + address));
    try (RedisKeyStore store = RedisKeyStore.builder(client).build();
        StatefulRedisConnection<String, String> raw = client.connect()) {
      RedisCommands<String, String> redis = raw.sync();
      Matcher version = Pattern.compile("redis_version:(\\S+)").matcher(redis.info("server"));
      System.out.println(
          "Redis " + (version.find() ? version.group(1) : "(version unknown)") + " at " + address);
      IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
      Duration ttl = Duration.ofHours(1);

      redis.configResetstat();
      for (int i = 0; i < N; i++) {
        guard.execute("g:" + i, ttl, ctx -> RESULT);
      }
      report("guard first send", redis.info("commandstats"), "set", "evalsha");

      redis.configResetstat();
      for (int i = 0; i < N; i++) {
        guard.execute("g:" + i, ttl, ctx -> "unused");
      }
      report("guard replay", redis.info("commandstats"), "set");

      redis.configResetstat();
      for (int i = 0; i < N; i++) {
        redis.set("f:" + i, "I", SetArgs.Builder.nx().px(3_600_000));
        redis.set("f:" + i, RESULT, SetArgs.Builder.keepttl());
      }
      report("floor first send", redis.info("commandstats"), "set");

      redis.configResetstat();
      for (int i = 0; i < N; i++) {
        redis.get("f:" + i);
      }
      report("floor replay", redis.info("commandstats"), "get");

      String sha = redis.scriptLoad("return redis.call('GET', KEYS[1])");
      redis.configResetstat();
      for (int i = 0; i < N; i++) {
        redis.evalsha(sha, ScriptOutputType.VALUE, "f:" + i);
      }
      report("smallest script (GET only)", redis.info("commandstats"), "evalsha");
    } finally {
      client.shutdown();
      if (server != null) {
        server.stop();
      }
    }
  }

  private static void report(String phase, String info, String... commands) {
    StringBuilder line = new StringBuilder(phase).append(", server time per call:");
    for (String command : commands) {
      line.append(' ').append(command).append(' ').append(usec(info, command)).append(" us;");
    }
    System.out.println(line);
  }

  private static String usec(String info, String command) {
    Matcher m =
        Pattern.compile("cmdstat_" + command + ":calls=(\\d+),usec=(\\d+),usec_per_call=([0-9.]+)")
            .matcher(info);
    return m.find() ? m.group(3) + " (" + m.group(1) + " calls)" : "n/a";
  }
}
