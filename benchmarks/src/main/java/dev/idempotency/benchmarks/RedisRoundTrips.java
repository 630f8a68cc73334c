package dev.idempotency.benchmarks;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.redis.RedisKeyStore;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.RecordState;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.SetArgs;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.async.RedisAsyncCommands;
import io.lettuce.core.api.sync.RedisCommands;
import io.lettuce.core.codec.ByteArrayCodec;
import io.lettuce.core.codec.RedisCodec;
import io.lettuce.core.codec.StringCodec;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.function.IntConsumer;

/**
 * One thread's Redis replay, taken apart in one JVM: the same round trip sent five ways, in
 * interleaved blocks, so that every variant sees the same JIT state, the same machine load and the
 * same scheduling. Written for issue #28's question why, in the peers harness at one thread, a
 * replay of ours took 78 µs at the median where Camel's {@code SET NX} took 30 µs.
 *
 * <ul>
 *   <li>{@code set-nx}: Camel's command, {@code SET key key NX EX 3600} on a key that exists
 *       (replies nil), through Lettuce's sync API;
 *   <li>{@code set-nx-get}: the store's replay command, {@code SET key record NX GET PX window},
 *       with a real completed record of the store's layout, through the sync API;
 *   <li>{@code set-nx-get-spin}: the same command through the async API, the caller spinning on
 *       {@code isDone()} instead of parking: what the caller's wake-up costs;
 *   <li>{@code store}: {@link RedisKeyStore#claim} of a completed record (the store without the
 *       guard);
 *   <li>{@code guard}: {@code guard.execute} of a key sent before.
 * </ul>
 *
 * <pre>
 * java -cp benchmarks/target/benchmarks.jar dev.idempotency.benchmarks.RedisRoundTrips \
 *     127.0.0.1:26379 [rounds 10] [ops per block 2000] [json file]
 * </pre>
 *
 * It writes 2,000 keys of its own under each of {@code rt:}, {@code rtc:} and {@code rtr:}, named
 * after the run, with one hour's expiry, and deletes nothing. Prints one line per block and, per
 * variant, the median over rounds of the blocks' p50 and mean, and the median of the per-round
 * ratio to {@code set-nx}.
 */
public final class RedisRoundTrips {

  private static final Duration TTL = Duration.ofHours(1);
  private static final int KEYS = 2_000;

  private RedisRoundTrips() {}

  /**
   * Runs the comparison.
   *
   * @param args {@code host:port}, optionally rounds, operations per block and a JSON-lines file
   * @throws Exception if Redis cannot be reached
   */
  public static void main(String[] args) throws Exception {
    if (args.length < 1) {
      System.err.println("usage: RedisRoundTrips HOST:PORT [rounds] [opsPerBlock] [json]");
      System.exit(2);
    }
    String[] hostPort = args[0].split(":");
    int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 10;
    int ops = args.length > 2 ? Integer.parseInt(args[2]) : 2_000;
    Path json = args.length > 3 ? Path.of(args[3]) : null;
    RedisClient client =
        RedisClient.create(RedisURI.create(hostPort[0], Integer.parseInt(hostPort[1])));
    try (StatefulRedisConnection<String, String> text = client.connect();
        StatefulRedisConnection<String, byte[]> binary =
            client.connect(RedisCodec.of(StringCodec.UTF8, ByteArrayCodec.INSTANCE));
        RedisKeyStore store = RedisKeyStore.builder(client).keyPrefix("rt:").build()) {
      IdempotencyGuard guard =
          IdempotencyGuard.builder()
              .store(store)
              .lease(Duration.ofSeconds(30))
              .inFlightWait(Duration.ofSeconds(10))
              .build();
      Map<String, IntConsumer> variants = variants(text, binary, store, guard);
      List<String> names = new ArrayList<>(variants.keySet());
      for (int warm = 0; warm < 3; warm++) {
        for (IntConsumer variant : variants.values()) {
          block(variant, ops);
        }
      }
      Map<String, List<double[]>> stats = new LinkedHashMap<>();
      names.forEach(name -> stats.put(name, new ArrayList<>()));
      for (int round = 0; round < rounds; round++) {
        String load = load();
        for (int i = 0; i < names.size(); i++) {
          String name = names.get((i + round) % names.size());
          double[] block = block(variants.get(name), ops);
          stats.get(name).add(block);
          String line =
              String.format(
                  Locale.ROOT,
                  "round %d %-16s p50 %7.1f  p90 %7.1f  p99 %7.1f  mean %7.1f us  load %s",
                  round,
                  name,
                  block[0],
                  block[1],
                  block[2],
                  block[3],
                  load);
          System.out.println(line);
          if (json != null) {
            Files.writeString(
                json,
                String.format(
                    Locale.ROOT,
                    "{\"tool\":\"RedisRoundTrips\",\"round\":%d,\"variant\":\"%s\",\"ops\":%d,"
                        + "\"p50_us\":%.2f,\"p90_us\":%.2f,\"p99_us\":%.2f,\"mean_us\":%.2f,"
                        + "\"load1\":%s}%n",
                    round,
                    name,
                    ops,
                    block[0],
                    block[1],
                    block[2],
                    block[3],
                    load),
                StandardCharsets.UTF_8,
                StandardOpenOption.CREATE,
                StandardOpenOption.APPEND);
          }
        }
      }
      summary(stats, new PrintWriter(System.out, true));
    } finally {
      client.shutdown();
    }
  }

  private static Map<String, IntConsumer> variants(
      StatefulRedisConnection<String, String> text,
      StatefulRedisConnection<String, byte[]> binary,
      RedisKeyStore store,
      IdempotencyGuard guard) {
    RedisCommands<String, String> sync = text.sync();
    RedisCommands<String, byte[]> bytes = binary.sync();
    RedisAsyncCommands<String, byte[]> async = binary.async();
    String[] keys = new String[KEYS];
    String[] keyIds = new String[KEYS];
    String run = Long.toString(System.currentTimeMillis(), 36);
    for (int i = 0; i < KEYS; i++) {
      keys[i] = run + "-k" + i;
      keyIds[i] = run + "-kid" + i;
      guard.execute(keys[i], TTL, ctx -> "result-16-bytes!");
      sync.set("rtc:" + keys[i], keys[i], SetArgs.Builder.nx().ex(TTL.toSeconds()));
      String token = "token-" + i;
      ClaimResult claimed = store.claim(request(keyIds[i], token));
      if (!(claimed instanceof ClaimResult.Claimed)) {
        throw new IllegalStateException("expected a fresh claim, got " + claimed);
      }
      store.complete(
          new CompleteRequest(
              keyIds[i],
              token,
              RecordState.COMPLETED,
              "result-16-bytes!".getBytes(StandardCharsets.UTF_8),
              Instant.now()));
    }
    // a completed record as the store writes it, to replay with the raw command
    byte[] record = bytes.get(store.redisKey(keyIds[0]));
    for (int i = 0; i < KEYS; i++) {
      bytes.set("rtr:" + keys[i], record, SetArgs.Builder.ex(TTL.toSeconds()));
    }
    SetArgs setGet = SetArgs.Builder.nx().px(TTL.toMillis());
    Map<String, IntConsumer> variants = new LinkedHashMap<>();
    variants.put(
        "set-nx",
        i -> {
          if (sync.set("rtc:" + keys[i], keys[i], SetArgs.Builder.nx().ex(3600)) != null) {
            throw new IllegalStateException("set-nx wrote a key it should have found");
          }
        });
    variants.put(
        "set-nx-get",
        i -> {
          if (bytes.setGet("rtr:" + keys[i], record, setGet) == null) {
            throw new IllegalStateException("set-nx-get found no record");
          }
        });
    if (Boolean.getBoolean("roundtrips.more")) {
      byte[][] keyBytes = new byte[KEYS][];
      for (int i = 0; i < KEYS; i++) {
        keyBytes[i] = keys[i].getBytes(StandardCharsets.UTF_8);
      }
      variants.put(
          "set-nx-binconn",
          i -> bytes.set("rtc:" + keys[i], keyBytes[i], SetArgs.Builder.nx().ex(3600)));
      variants.put("get", i -> bytes.get("rtr:" + keys[i]));
      variants.put("set-nx-get-small", i -> sync.setGet("rtc:" + keys[i], keys[i], setGet));
      variants.put(
          "set-nx-get-async",
          i -> async.setGet("rtr:" + keys[i], record, setGet).toCompletableFuture().join());
    }
    variants.put(
        "set-nx-get-spin",
        i -> {
          CompletableFuture<byte[]> reply =
              async.setGet("rtr:" + keys[i], record, setGet).toCompletableFuture();
          while (!reply.isDone()) {
            Thread.onSpinWait();
          }
          if (reply.join() == null) {
            throw new IllegalStateException("set-nx-get found no record");
          }
        });
    variants.put(
        "store",
        i -> {
          if (!(store.claim(request(keyIds[i], "other")) instanceof ClaimResult.Existing)) {
            throw new IllegalStateException("store replay found no record");
          }
        });
    variants.put("guard", i -> guard.execute(keys[i], TTL, ctx -> "never sent"));
    return variants;
  }

  private static ClaimRequest request(String keyId, String token) {
    return new ClaimRequest(
        keyId, token, "", Instant.now(), Duration.ofSeconds(30), TTL, true, null);
  }

  /** One block: p50, p90, p99 and mean in microseconds. */
  private static double[] block(IntConsumer variant, int ops) {
    long[] nanos = new long[ops];
    for (int n = 0; n < ops; n++) {
      long start = System.nanoTime();
      variant.accept(n % KEYS);
      nanos[n] = System.nanoTime() - start;
    }
    long sum = 0;
    for (long value : nanos) {
      sum += value;
    }
    Arrays.sort(nanos);
    return new double[] {
      nanos[ops / 2] / 1e3,
      nanos[ops * 9 / 10] / 1e3,
      nanos[Math.min(ops - 1, ops * 99 / 100)] / 1e3,
      sum / 1e3 / ops
    };
  }

  private static void summary(Map<String, List<double[]>> stats, PrintWriter out) {
    List<double[]> base = stats.values().iterator().next();
    out.println();
    out.println("variant           p50 (median of blocks)  mean  p50 / set-nx (median per round)");
    for (Map.Entry<String, List<double[]>> entry : stats.entrySet()) {
      List<double[]> blocks = entry.getValue();
      double[] ratio = new double[blocks.size()];
      for (int r = 0; r < blocks.size(); r++) {
        ratio[r] = blocks.get(r)[0] / base.get(r)[0];
      }
      out.printf(
          Locale.ROOT,
          "%-16s  %7.1f us             %7.1f us  %.2f%n",
          entry.getKey(),
          median(blocks.stream().mapToDouble(b -> b[0]).toArray()),
          median(blocks.stream().mapToDouble(b -> b[3]).toArray()),
          median(ratio));
    }
  }

  static double median(double[] values) {
    double[] sorted = values.clone();
    Arrays.sort(sorted);
    int n = sorted.length;
    return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  }

  private static String load() {
    try {
      return Files.readString(Path.of("/proc/loadavg")).split(" ")[0];
    } catch (IOException e) {
      return "\"?\"";
    }
  }
}
