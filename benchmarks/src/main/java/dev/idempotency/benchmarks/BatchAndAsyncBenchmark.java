package dev.idempotency.benchmarks;

import dev.idempotency.AsyncSender;
import dev.idempotency.Batch;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.ResultCodec;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Keys per second for a batch of 1,000 keys (first send and replay), against single-key {@code
 * executeAsync}, on Redis and PostgreSQL.
 *
 * <pre>
 * java -jar benchmarks/target/benchmarks.jar BatchAndAsyncBenchmark -t 1
 * </pre>
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Fork(1)
@Warmup(iterations = 1, time = 3)
@Measurement(iterations = 2, time = 3)
public class BatchAndAsyncBenchmark {

  static final int BATCH = 1_000;
  static final AsyncSender<String> NO_OP =
      ctx -> CompletableFuture.completedFuture("n_0123456789abcd");

  /** The store, with a batch of keys already sent for the replay case. */
  @State(Scope.Benchmark)
  public static class Store {
    @Param({"postgresql", "redis"})
    public String store;

    Backend backend;
    IdempotencyGuard guard;
    final List<IdempotencyRequest> sentBatch = new ArrayList<>();
    final String run = UUID.randomUUID().toString().substring(0, 8);
    final AtomicLong next = new AtomicLong();

    @Setup(Level.Trial)
    public void start() throws Exception {
      backend = Backend.start(store);
      guard = IdempotencyGuard.builder().store(backend.store).build();
      for (int i = 0; i < BATCH; i++) {
        sentBatch.add(IdempotencyRequest.of("sent:" + run + ":" + i, Backend.TTL));
      }
      sendAll(guard.claimBatch(sentBatch, ResultCodec.string()));
    }

    @TearDown(Level.Trial)
    public void stop() throws Exception {
      backend.close();
    }

    List<IdempotencyRequest> newBatch() {
      List<IdempotencyRequest> batch = new ArrayList<>(BATCH);
      for (int i = 0; i < BATCH; i++) {
        batch.add(IdempotencyRequest.of("new:" + run + ":" + next.getAndIncrement(), Backend.TTL));
      }
      return batch;
    }
  }

  static int sendAll(Batch<String> batch) {
    batch.toSend().forEach(item -> batch.succeeded(item, "n_0123456789abcd"));
    return batch.record().completed();
  }

  @Benchmark
  @OperationsPerInvocation(BATCH)
  public int firstSendBatch(Store s) {
    return sendAll(s.guard.claimBatch(s.newBatch(), ResultCodec.string()));
  }

  @Benchmark
  @OperationsPerInvocation(BATCH)
  public int replayBatch(Store s) {
    return s.guard.claimBatch(s.sentBatch, ResultCodec.string()).replayed().size();
  }

  @Benchmark
  @OperationsPerInvocation(BATCH)
  public int asyncFirstSends(Store s) {
    List<CompletableFuture<String>> calls = new ArrayList<>(BATCH);
    for (IdempotencyRequest request : s.newBatch()) {
      calls.add(s.guard.executeAsync(request.key(), Backend.TTL, NO_OP).toCompletableFuture());
    }
    calls.forEach(CompletableFuture::join);
    return calls.size();
  }

  @Benchmark
  @OperationsPerInvocation(BATCH)
  public int asyncReplays(Store s) {
    List<CompletableFuture<String>> calls = new ArrayList<>(BATCH);
    for (IdempotencyRequest request : s.sentBatch) {
      calls.add(s.guard.executeAsync(request.key(), Backend.TTL, NO_OP).toCompletableFuture());
    }
    calls.forEach(CompletableFuture::join);
    return calls.size();
  }
}
