package dev.idempotency.benchmarks;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.RecordState;
import java.time.Duration;
import java.time.Instant;
import java.util.UUID;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The raw SQL statements in the shapes the guard is bound to, beside {@link GuardBenchmark}'s
 * floors: a first send on two borrowed connections (the guard holds none while the sender runs),
 * and a replay as insert-if-absent then select (dialects without a one-statement claim); and the
 * store's own statements called directly, without the guard. The guard against these tells what the
 * shape costs, what the store's statements cost, and what the guard itself adds.
 *
 * <pre>
 * java -jar benchmarks/target/benchmarks.jar SqlShapesBenchmark -t 32 -bm thrpt -tu s
 * </pre>
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Fork(1)
@Warmup(iterations = 1, time = 3)
@Measurement(iterations = 3, time = 3)
public class SqlShapesBenchmark {

  /** The database under benchmark, started once per trial. */
  @State(Scope.Benchmark)
  public static class Database {
    @Param({"h2", "postgresql", "mariadb"})
    public String store;

    Backend backend;
    final String[] replayKeys = new String[GuardBenchmark.REPLAY_KEYS];
    final String[] storeReplayKeyIds = new String[GuardBenchmark.REPLAY_KEYS];

    @Setup(Level.Trial)
    public void start() throws Exception {
      backend = Backend.start(store);
      String run = UUID.randomUUID().toString().substring(0, 8);
      for (int i = 0; i < replayKeys.length; i++) {
        replayKeys[i] = "shape-replay:" + run + ":" + i;
        backend.floor.firstSend(replayKeys[i]);
      }
      IdempotencyGuard guard = IdempotencyGuard.builder().store(backend.store).build();
      for (int i = 0; i < storeReplayKeyIds.length; i++) {
        String key = "store-replay:" + run + ":" + i;
        guard.execute(key, Backend.TTL, GuardBenchmark.NO_OP);
        storeReplayKeyIds[i] = IdempotencyKey.digest(key);
      }
    }

    @TearDown(Level.Trial)
    public void stop() throws Exception {
      backend.close();
    }
  }

  @Benchmark
  public void firstSendTwoBorrows(Database d, GuardBenchmark.Keys k) {
    d.backend.sqlShapes.firstSendTwoBorrows(k.newKey());
  }

  /** The store's claim and complete, as the guard issues them, without the guard. */
  @Benchmark
  public boolean storeFirstSend(Database d, GuardBenchmark.Keys k) {
    String keyId = IdempotencyKey.digest(k.newKey());
    String token = Long.toHexString(ThreadLocalRandom.current().nextLong());
    ClaimResult claim = d.backend.store.claim(claim(keyId, token));
    return claim instanceof ClaimResult.Claimed
        && d.backend.store.complete(
            new CompleteRequest(
                keyId, token, RecordState.COMPLETED, Backend.RESULT, Instant.now()));
  }

  /** The store's claim of a completed key, without the guard. */
  @Benchmark
  public ClaimResult storeReplay(Database d, GuardBenchmark.Keys k) {
    String token = Long.toHexString(ThreadLocalRandom.current().nextLong());
    return d.backend.store.claim(claim(d.storeReplayKeyIds[k.replayIndex()], token));
  }

  private static ClaimRequest claim(String keyId, String token) {
    return new ClaimRequest(
        keyId, token, "", Instant.now(), Duration.ofSeconds(30), Backend.TTL, true, null);
  }

  @Benchmark
  public Object replayInsertThenSelect(Database d, GuardBenchmark.Keys k) {
    return d.backend.sqlShapes.replayInsertThenSelect(d.replayKeys[k.replayIndex()]);
  }
}
