package dev.idempotency.benchmarks;

import dev.idempotency.IdempotencyGuard;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.apache.camel.component.redis.processor.idempotent.SpringRedisStringIdempotentRepository;
import org.apache.camel.processor.idempotent.jdbc.JdbcMessageIdRepository;
import org.apache.camel.spi.IdempotentRepository;
import org.apache.camel.support.service.ServiceSupport;
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
import org.springframework.data.redis.connection.RedisStandaloneConfiguration;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;
import org.springframework.data.redis.core.StringRedisTemplate;

/**
 * The guard beside what a team would pick instead, on the same server and the same pool or client:
 * Apache Camel's idempotent repositories, used as Camel's idempotent consumer uses them ({@code
 * add(key)}, and the send only when it returns true). They are filters: a repeat learns that the
 * key was seen, not the first call's result, which the guard stores and returns.
 *
 * <ul>
 *   <li>{@code postgresql-durable}: PostgreSQL with {@code fsync}, {@code synchronous_commit} and
 *       {@code full_page_writes} on, as production runs it; Camel's {@code JdbcMessageIdRepository}
 *       ({@code camel-sql}) on the same HikariCP pool.
 *   <li>{@code postgresql}: the same with zonky's defaults ({@code fsync} and {@code
 *       synchronous_commit} off), the server every other benchmark here uses.
 *   <li>{@code redis}: standalone Redis without persistence; Camel's {@code
 *       SpringRedisStringIdempotentRepository} ({@code camel-spring-redis}, one {@code SET NX EX}
 *       per call) through Spring Data Redis on its own Lettuce connection.
 * </ul>
 *
 * <pre>
 * java -jar benchmarks/target/benchmarks.jar PeersBenchmark -t 1 -bm sample -tu us
 * java -jar benchmarks/target/benchmarks.jar PeersBenchmark -t 16 -bm thrpt -tu s
 * </pre>
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Fork(1)
@Warmup(iterations = 2, time = 2)
@Measurement(iterations = 3, time = 2)
public class PeersBenchmark {

  /** The server, the guard on it, and Camel's repository on it, started once per trial. */
  @State(Scope.Benchmark)
  public static class Peers {
    @Param({"postgresql-durable", "postgresql", "redis"})
    public String store;

    Backend backend;
    IdempotencyGuard guard;
    IdempotentRepository camel;
    private LettuceConnectionFactory redisFactory;
    final String[] replayKeys = new String[GuardBenchmark.REPLAY_KEYS];
    final String[] camelReplayKeys = new String[GuardBenchmark.REPLAY_KEYS];

    @Setup(Level.Trial)
    public void start() throws Exception {
      backend = Backend.start(store);
      guard = IdempotencyGuard.builder().store(backend.store).build();
      camel = store.equals("redis") ? camelRedis() : camelJdbc();
      ((ServiceSupport) camel).start();
      String run = UUID.randomUUID().toString().substring(0, 8);
      for (int i = 0; i < replayKeys.length; i++) {
        replayKeys[i] = "replay:" + run + ":" + i;
        guard.execute(replayKeys[i], Backend.TTL, GuardBenchmark.NO_OP);
        camelReplayKeys[i] = "camel-replay:" + run + ":" + i;
        if (!camel.add(camelReplayKeys[i])) {
          throw new IllegalStateException("Camel saw a new key as a repeat");
        }
      }
    }

    private IdempotentRepository camelJdbc() {
      JdbcMessageIdRepository repository = new JdbcMessageIdRepository(backend.dataSource, "bench");
      repository.setCreateTableIfNotExists(true);
      return repository;
    }

    private IdempotentRepository camelRedis() {
      redisFactory =
          new LettuceConnectionFactory(
              new RedisStandaloneConfiguration("127.0.0.1", backend.redisPort));
      redisFactory.afterPropertiesSet();
      redisFactory.start();
      SpringRedisStringIdempotentRepository repository =
          new SpringRedisStringIdempotentRepository(new StringRedisTemplate(redisFactory), "bench");
      repository.setExpiry(Backend.TTL.toSeconds());
      return repository;
    }

    @TearDown(Level.Trial)
    public void stop() throws Exception {
      ((ServiceSupport) camel).stop();
      if (redisFactory != null) {
        redisFactory.destroy();
      }
      backend.close();
    }
  }

  @Benchmark
  public String oursFirstSend(Peers p, GuardBenchmark.Keys k) {
    return p.guard.execute(k.newKey(), Backend.TTL, GuardBenchmark.NO_OP);
  }

  @Benchmark
  public String oursReplay(Peers p, GuardBenchmark.Keys k) {
    return p.guard.execute(p.replayKeys[k.replayIndex()], Backend.TTL, GuardBenchmark.NO_OP);
  }

  @Benchmark
  public String camelFirstSend(Peers p, GuardBenchmark.Keys k) throws Exception {
    return p.camel.add(k.newKey()) ? GuardBenchmark.NO_OP.send(null) : null;
  }

  @Benchmark
  public String camelReplay(Peers p, GuardBenchmark.Keys k) throws Exception {
    return p.camel.add(p.camelReplayKeys[k.replayIndex()]) ? GuardBenchmark.NO_OP.send(null) : null;
  }
}
