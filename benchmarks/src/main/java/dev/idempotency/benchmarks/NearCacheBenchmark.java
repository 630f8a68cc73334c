package dev.idempotency.benchmarks;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.NearCache;
import dev.idempotency.Sender;
import java.time.Duration;
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
 * Replays of a few hot keys (a retry storm, a redelivery to the same consumer) through the guard
 * with and without the opt-in {@link NearCache} (#28's target: at least 20 times the store path).
 *
 * <pre>
 * java -jar benchmarks/target/benchmarks.jar NearCacheBenchmark -p store=redis,postgresql
 * </pre>
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Fork(1)
@Warmup(iterations = 2, time = 3)
@Measurement(iterations = 5, time = 3)
public class NearCacheBenchmark {

  static final Sender<String> NO_OP = ctx -> "n_0123456789abcd";
  static final int HOT_KEYS = 16;

  /** The store, and a guard on it with the near cache and one without. */
  @State(Scope.Benchmark)
  public static class Store {
    @Param({"redis", "postgresql"})
    public String store;

    Backend backend;
    IdempotencyGuard plain;
    IdempotencyGuard cached;
    final String[] hotKeys = new String[HOT_KEYS];

    @Setup(Level.Trial)
    public void start() throws Exception {
      backend = Backend.start(store);
      plain = IdempotencyGuard.builder().store(backend.store).build();
      cached =
          IdempotencyGuard.builder()
              .store(backend.store)
              .nearCache(NearCache.of(10_000, Duration.ofSeconds(30)))
              .build();
      String run = UUID.randomUUID().toString().substring(0, 8);
      for (int i = 0; i < HOT_KEYS; i++) {
        hotKeys[i] = "hot:" + run + ":" + i;
        plain.execute(hotKeys[i], Backend.TTL, NO_OP);
      }
    }

    @TearDown(Level.Trial)
    public void stop() throws Exception {
      plain.close();
      cached.close();
      backend.close();
    }
  }

  /** Per-thread position in the hot keys. */
  @State(Scope.Thread)
  public static class Position {
    private static final AtomicInteger THREADS = new AtomicInteger();
    private int next = THREADS.incrementAndGet();

    int index() {
      next = (next + 1) % HOT_KEYS;
      return next;
    }
  }

  @Benchmark
  public String replayFromTheStore(Store s, Position p) {
    return s.plain.execute(s.hotKeys[p.index()], Backend.TTL, NO_OP);
  }

  @Benchmark
  public String replayFromTheNearCache(Store s, Position p) {
    return s.cached.execute(s.hotKeys[p.index()], Backend.TTL, NO_OP);
  }
}
