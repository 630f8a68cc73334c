package dev.idempotency.spring.web;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.Outcome;
import dev.idempotency.redis.RedisKeyStore;
import dev.idempotency.spring.Jackson3JsonCodecs;
import dev.idempotency.spring.JsonCodecs;
import dev.idempotency.spring.PendingCall;
import io.lettuce.core.RedisClient;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
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
import tools.jackson.databind.json.JsonMapper;

/**
 * What {@link IdempotentEndpoint} does per request besides HTTP, without HTTP (issue 39): the key
 * header's checks and scoping with the operation name, the request fingerprint (canonical JSON),
 * the stored response's encoding and decoding, and the guard's claim and outcome on a real Redis
 * (the path the Spring MVC interceptor takes: {@link PendingCall} with {@link StoredResponse}'s
 * codec). The request is run.sh's: {@code POST /guarded}, a 52-byte JSON body, a 20-byte JSON
 * answer. Read with {@code -prof gc} ({@code gc.alloc.rate.norm}: bytes allocated per request, by
 * every thread of the JVM, which a busy machine does not move).
 *
 * <pre>{@code
 * java -cp "benchmarks/http/target/classes:$(cat benchmarks/http/target/classpath.txt)" \
 *     org.openjdk.jmh.Main EndpointRequestBenchmark -prof gc -f 1 -wi 3 -i 5 -w 2s -r 2s
 * }</pre>
 *
 * <p>{@code REDIS_SERVER} (default {@code redis-server}, Debian's) is started on a free port for
 * the Redis benchmarks and stopped after them.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(1)
public class EndpointRequestBenchmark {

  static final byte[] BODY =
      "{\"to\":\"+15550100\",\"template\":\"otp\",\"code\":\"123456\"}"
          .getBytes(StandardCharsets.UTF_8);
  static final byte[] ANSWER = "{\"id\":1234,\"bytes\":52}".getBytes(StandardCharsets.UTF_8);
  static final List<Map.Entry<String, String>> HEADERS =
      List.of(Map.entry("Content-Type", "application/json"));
  static final Duration TTL = Duration.ofHours(24);
  static final Duration MAX_WAIT = Duration.ofSeconds(10);

  /** The request's own work: no store. */
  @State(Scope.Thread)
  public static class Work {
    JsonCodecs json;
    byte[] encoded;
    final String[] keys = new String[4096];
    int next;

    @Setup
    public void setUp() throws Exception {
      json = new Jackson3JsonCodecs(JsonMapper.builder().build());
      encoded = StoredResponse.CODEC.encode(new StoredResponse(200, HEADERS, ANSWER));
      for (int i = 0; i < keys.length; i++) {
        keys[i] = String.format("run-bench-t1-%012d", i); // as first-send.lua writes them
      }
    }

    /** A client's key, made beforehand: its making is not the endpoint's work. */
    String nextKey() {
      next = (next + 1) & (keys.length - 1);
      return keys[next];
    }
  }

  /** The key header checked and scoped, and the operation name (per request on both stacks). */
  @Benchmark
  public Object keyAndOperation(Work work) {
    EndpointKeys.Checked checked =
        EndpointKeys.check(
            "Idempotency-Key", List.of(work.nextKey()), true, "POST", "/guarded", "", 8);
    return EndpointKeys.operation("POST", "/guarded") + checked.hashCode();
  }

  /** The request fingerprint: path, query and the canonical JSON body. */
  @Benchmark
  public String fingerprint(Work work) {
    return BodyFingerprint.ofBody("/guarded", null, "application/json", BODY, work.json);
  }

  /** The key's id at rest (the store's digest of the scoped key). */
  @Benchmark
  public String keyDigest(Work work) {
    return IdempotencyKey.digest(work.nextKey());
  }

  /** A first send's stored response, encoded. */
  @Benchmark
  public byte[] storedResponseEncode() throws Exception {
    return StoredResponse.CODEC.encode(new StoredResponse(200, HEADERS, ANSWER));
  }

  /** A replay's stored response, decoded. */
  @Benchmark
  public StoredResponse storedResponseDecode(Work work) throws Exception {
    return StoredResponse.CODEC.decode(work.encoded);
  }

  /** A real Redis and a guard on it, as the starter builds one. */
  @State(Scope.Benchmark)
  public static class Redis {
    @Param({"1000"})
    int replayKeys;

    Process server;
    RedisClient client;
    IdempotencyGuard guard;
    final AtomicLong counter = new AtomicLong();
    String run;

    @Setup(Level.Trial)
    public void setUp() throws Exception {
      int port;
      try (ServerSocket socket = new ServerSocket(0)) {
        port = socket.getLocalPort();
      }
      server =
          new ProcessBuilder(
                  System.getenv().getOrDefault("REDIS_SERVER", "redis-server"),
                  "--port",
                  String.valueOf(port),
                  "--bind",
                  "127.0.0.1",
                  "--save",
                  "",
                  "--appendonly",
                  "no")
              .redirectErrorStream(true)
              .redirectOutput(ProcessBuilder.Redirect.DISCARD)
              .start();
      client = RedisClient.create("redis://127.0.0.1:" + port);
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (true) {
        try (var connection = client.connect()) {
          connection.sync().ping();
          break;
        } catch (RuntimeException notYet) {
          if (System.nanoTime() > deadline) {
            throw notYet;
          }
          Thread.sleep(50);
        }
      }
      guard = IdempotencyGuard.builder().store(RedisKeyStore.builder(client).build()).build();
      run = Long.toString(System.nanoTime());
      for (int i = 0; i < replayKeys; i++) {
        Outcome<StoredResponse> outcome = call(guard, replayKey(i));
        if (outcome.replayed()) {
          throw new IllegalStateException("a replay key was not new");
        }
      }
    }

    String replayKey(int i) {
      return IdempotencyKey.of("http", "POST", "/guarded", "", run + "-replay-" + i);
    }

    String firstSendKey() {
      return IdempotencyKey.of(
          "http", "POST", "/guarded", "", run + "-first-" + counter.incrementAndGet());
    }

    @TearDown(Level.Trial)
    public void tearDown() throws Exception {
      guard.close();
      client.shutdown();
      server.destroy();
      server.waitFor(10, TimeUnit.SECONDS);
    }
  }

  /** The Spring MVC endpoint's guard steps: claim, the handler's answer, its outcome awaited. */
  static Outcome<StoredResponse> call(IdempotencyGuard guard, String key) {
    PendingCall<StoredResponse> call =
        PendingCall.claim(
            guard,
            IdempotencyRequest.of(key, TTL)
                .withFingerprint("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
                .withOperation("http.POST_guarded"),
            StoredResponse.CODEC,
            MAX_WAIT);
    if (call.claimed()) {
      call.completeAndAwait(new StoredResponse(200, HEADERS, ANSWER), MAX_WAIT);
    }
    return call.outcome().join();
  }

  /** A first send on Redis: the claim and the outcome (two round trips). */
  @Benchmark
  public Object redisFirstSend(Redis redis) {
    Outcome<StoredResponse> outcome = call(redis.guard, redis.firstSendKey());
    if (outcome.replayed()) {
      throw new IllegalStateException("a first send was replayed");
    }
    return outcome;
  }

  /** A replay on Redis: one round trip, the stored response decoded. */
  @Benchmark
  public Object redisReplay(Redis redis) {
    int i = (int) (redis.counter.incrementAndGet() % redis.replayKeys);
    Outcome<StoredResponse> outcome = call(redis.guard, redis.replayKey(i));
    if (!outcome.replayed()) {
      throw new IllegalStateException("a replay was sent");
    }
    return outcome;
  }
}
