package dev.idempotency.benchmarks;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.redis.RedisKeyStore;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.SetArgs;
import io.lettuce.core.api.sync.RedisCommands;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.function.IntConsumer;

/**
 * One thread's Redis replays, for a CPU profile of them alone: the guard on {@link RedisKeyStore},
 * or the harness's floor ({@code SET NX GET PX} on Lettuce's sync API, {@code SET KEEPTTL} after a
 * first send). It sends 20,000 keys once, replays them five times to warm up, then replays {@code
 * ops} times and prints the wall time and the calling thread's CPU time per replay.
 *
 * <p>With {@code -Dprofile.file=out.collapsed} and async-profiler's jar on the class path ({@code
 * tools.profiler:async-profiler}, 3.0 here), it profiles the measured replays only (CPU, every 100
 * µs, by thread) and writes collapsed stacks.
 *
 * <pre>
 * java -Dprofile.file=guard.collapsed \
 *     -cp benchmarks/target/benchmarks.jar:async-profiler-3.0.jar \
 *     dev.idempotency.benchmarks.RedisReplayProfile guard|floor 127.0.0.1:26379 100000
 * </pre>
 *
 * <p>With {@code -Dprofile.onePass=true} it runs the peers harness's shape instead: one pass of
 * {@code ops} replays over keys each replayed once (see {@code onePass}).
 *
 * <p>It empties the Redis database first.
 */
public final class RedisReplayProfile {

  private static final int KEYS = 20_000;
  private static final Duration TTL = Duration.ofHours(1);

  private RedisReplayProfile() {}

  /**
   * Runs the replays.
   *
   * @param args {@code guard} or {@code floor}, {@code host:port}, replays to measure
   * @throws Exception if Redis cannot be reached or the profiler fails
   */
  public static void main(String[] args) throws Exception {
    if (args.length != 3) {
      System.err.println("usage: RedisReplayProfile guard|floor HOST:PORT REPLAYS");
      System.exit(2);
    }
    String[] hostPort = args[1].split(":");
    int replays = Integer.parseInt(args[2]);
    RedisClient client =
        RedisClient.create(RedisURI.create(hostPort[0], Integer.parseInt(hostPort[1])));
    RedisCommands<String, String> redis = client.connect().sync();
    redis.flushdb();
    IntConsumer replay =
        switch (args[0]) {
          case "guard" -> guard(client);
          case "floor" -> floor(redis);
          default -> throw new IllegalArgumentException("guard or floor, not " + args[0]);
        };
    if (Boolean.getBoolean("profile.onePass")) {
      onePass(args[0], replay, replays);
      System.exit(0);
    }
    for (int round = 0; round < 6; round++) {
      for (int i = 0; i < KEYS; i++) {
        replay.accept(i);
      }
    }
    String profile = System.getProperty("profile.file");
    Object profiler = profile == null ? null : profiler("start,event=cpu,interval=100us,threads");
    ThreadMXBean threads = ManagementFactory.getThreadMXBean();
    long cpu = threads.getCurrentThreadCpuTime();
    long start = System.nanoTime();
    for (int i = 0; i < replays; i++) {
      replay.accept(i % KEYS);
    }
    long wall = System.nanoTime() - start;
    cpu = threads.getCurrentThreadCpuTime() - cpu;
    if (profiler != null) {
      profiler.getClass().getMethod("execute", String.class).invoke(profiler, "stop");
      profiler
          .getClass()
          .getMethod("execute", String.class)
          .invoke(profiler, "collapsed,file=" + profile);
    }
    System.out.printf(
        Locale.ROOT,
        "%s replay T=1: %.1f us/op wall, %.1f us/op of the caller's CPU%n",
        args[0],
        wall / 1e3 / replays,
        cpu / 1e3 / replays);
    System.exit(0);
  }

  /**
   * The peers harness's shape instead ({@code -Dprofile.onePass=true}): 10,000 keys sent and
   * replayed once to warm up, then {@code keys} fresh keys sent once, then replayed once, each
   * replay's latency recorded as the harness records it; prints the replays' median and 99th
   * percentile. The keys run past the 20,000 the other mode reuses, so none is replayed twice.
   */
  private static void onePass(String name, IntConsumer call, int keys) {
    int warmup = 10_000;
    for (int pass = 0; pass < 2; pass++) {
      for (int i = 0; i < warmup; i++) {
        call.accept(KEYS + i);
      }
    }
    int first = KEYS + warmup;
    for (int i = 0; i < keys; i++) {
      call.accept(first + i);
    }
    long[] latencies = new long[keys];
    long start = System.nanoTime();
    for (int i = 0; i < keys; i++) {
      long t0 = System.nanoTime();
      call.accept(first + i);
      latencies[i] = System.nanoTime() - t0;
    }
    long wall = System.nanoTime() - start;
    Arrays.sort(latencies);
    System.out.printf(
        Locale.ROOT,
        "%s one pass of %d replays, T=1: %.1f us/op wall, p50 %.1f us, p99 %.1f us%n",
        name,
        keys,
        wall / 1e3 / keys,
        latencies[keys / 2] / 1e3,
        latencies[(int) (keys * 0.99)] / 1e3);
  }

  private static IntConsumer guard(RedisClient client) {
    IdempotencyGuard guard =
        IdempotencyGuard.builder()
            .store(RedisKeyStore.builder(client).keyPrefix("profile:").build())
            .build();
    return i -> guard.execute("k" + i, TTL, ctx -> "result-" + i);
  }

  private static IntConsumer floor(RedisCommands<String, String> redis) {
    return i -> {
      String key = "floor:k" + i;
      if (redis.setGet(key, "\u0000in-progress", SetArgs.Builder.nx().px(TTL.toMillis())) == null) {
        redis.set(key, "result-" + i, SetArgs.Builder.keepttl());
      }
    };
  }

  private static Object profiler(String command) throws Exception {
    Object profiler =
        Class.forName("one.profiler.AsyncProfiler").getMethod("getInstance").invoke(null);
    profiler.getClass().getMethod("execute", String.class).invoke(profiler, command);
    return profiler;
  }
}
