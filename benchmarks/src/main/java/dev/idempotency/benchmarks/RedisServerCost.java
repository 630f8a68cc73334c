package dev.idempotency.benchmarks;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.redis.FreePorts;
import dev.idempotency.redis.RedisKeyStore;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.SetArgs;
import io.lettuce.core.api.StatefulRedisConnection;
import java.time.Duration;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import redis.embedded.RedisServer;

/**
 * Server-side cost per command, from {@code INFO commandstats}: the guard's scripts against the
 * floor's {@code SET} and {@code GET}, after 20,000 first sends and 20,000 replays of each.
 *
 * <pre>
 * java -cp benchmarks/target/benchmarks.jar dev.idempotency.benchmarks.RedisServerCost
 * </pre>
 */
public final class RedisServerCost {

  private RedisServerCost() {}

  /**
   * Measures and prints.
   *
   * @param args ignored
   */
  public static void main(String[] args) {
    int port = FreePorts.next();
    RedisServer server =
        RedisServer.builder().port(port).setting("bind 127.0.0.1").setting("save \"\"").build();
    server.start();
    RedisClient client = RedisClient.create(RedisURI.create("redis://127.0.0.1:" + port));
    try (RedisKeyStore store = RedisKeyStore.builder(client).build();
        StatefulRedisConnection<String, String> raw = client.connect()) {
      IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
      int n = 20_000;
      for (int i = 0; i < n; i++) {
        guard.execute("g:" + i, Duration.ofHours(1), ctx -> "n_0123456789abcd");
        raw.sync().set("f:" + i, "I", SetArgs.Builder.nx().px(3_600_000));
        raw.sync().set("f:" + i, "n_0123456789abcd", SetArgs.Builder.keepttl());
      }
      raw.sync().configResetstat();
      for (int i = 0; i < n; i++) {
        guard.execute("g:" + i, Duration.ofHours(1), ctx -> "unused");
        raw.sync().get("f:" + i);
      }
      String replays = raw.sync().info("commandstats");
      System.out.println(
          "replay, server time per call: evalsha (script incl. TIME and HMGET) "
              + usec(replays, "evalsha")
              + " us, get "
              + usec(replays, "get")
              + " us");
    } finally {
      client.shutdown();
      server.stop();
    }
  }

  private static String usec(String info, String command) {
    Matcher m =
        Pattern.compile("cmdstat_" + command + ":calls=(\\d+),usec=(\\d+),usec_per_call=([0-9.]+)")
            .matcher(info);
    return m.find() ? m.group(3) + " (" + m.group(1) + " calls)" : "n/a";
  }
}
