package dev.idempotency.benchmarks;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.Sender;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
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
 * {@code guard.execute} on a new key (claim, a no-op sender, complete) and on a replay, beside the
 * floor: the same work with the raw store operations and no guard.
 *
 * <pre>
 * java -jar benchmarks/target/benchmarks.jar GuardBenchmark -t 1 -bm sample -tu us
 * java -jar benchmarks/target/benchmarks.jar GuardBenchmark -t 32 -bm thrpt -tu s
 * </pre>
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Fork(1)
@Warmup(iterations = 1, time = 3)
@Measurement(iterations = 3, time = 3)
public class GuardBenchmark {

  static final Sender<String> NO_OP = ctx -> "n_0123456789abcd";
  static final int REPLAY_KEYS = 2_000;

  /** The store under benchmark, started once per trial. */
  @State(Scope.Benchmark)
  public static class Store {
    @Param({"memory", "h2", "postgresql", "mariadb", "redis", "redis-cluster"})
    public String store;

    Backend backend;
    IdempotencyGuard guard;
    final String[] replayKeys = new String[REPLAY_KEYS];
    final String[] floorReplayKeys = new String[REPLAY_KEYS];

    @Setup(Level.Trial)
    public void start() throws Exception {
      backend = Backend.start(store);
      guard = IdempotencyGuard.builder().store(backend.store).build();
      String run = UUID.randomUUID().toString().substring(0, 8);
      for (int i = 0; i < REPLAY_KEYS; i++) {
        replayKeys[i] = "replay:" + run + ":" + i;
        guard.execute(replayKeys[i], Backend.TTL, NO_OP);
        floorReplayKeys[i] = "floor-replay:" + run + ":" + i;
        backend.floor.firstSend(floorReplayKeys[i]);
      }
    }

    @TearDown(Level.Trial)
    public void stop() throws Exception {
      backend.close();
    }
  }

  /** Per-thread key sequences. */
  @State(Scope.Thread)
  public static class Keys {
    private static final AtomicInteger THREADS = new AtomicInteger();
    private final String prefix =
        "new:"
            + UUID.randomUUID().toString().substring(0, 8)
            + ":"
            + THREADS.incrementAndGet()
            + ":";
    private long next;
    private int replay = THREADS.get() * 7919;

    String newKey() {
      return prefix + next++;
    }

    int replayIndex() {
      replay = (replay + 1) % REPLAY_KEYS;
      return replay;
    }
  }

  @Benchmark
  public String firstSend(Store s, Keys k) {
    return s.guard.execute(k.newKey(), Backend.TTL, NO_OP);
  }

  @Benchmark
  public String replay(Store s, Keys k) {
    return s.guard.execute(s.replayKeys[k.replayIndex()], Backend.TTL, NO_OP);
  }

  @Benchmark
  public void floorFirstSend(Store s, Keys k) {
    s.backend.floor.firstSend(k.newKey());
  }

  @Benchmark
  public Object floorReplay(Store s, Keys k) {
    return s.backend.floor.replay(s.floorReplayKeys[k.replayIndex()]);
  }
}
