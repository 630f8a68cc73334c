package dev.idempotency.benchmarks;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.jdbc.JdbcKeyStore;
import dev.idempotency.redis.RedisKeyStore;
import dev.idempotency.testservers.FreePorts;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.time.Duration;
import java.util.Map;
import org.jdbi.v3.core.Jdbi;
import redis.embedded.RedisServer;

/**
 * Bytes per stored key, for a 16-byte result: heap per record in the in-memory store (heap delta
 * over a million keys), {@code MEMORY USAGE} per record in Redis, and table plus index bytes per
 * row in PostgreSQL. Every record stores the 16-byte result plus the guard's one-byte tag.
 *
 * <pre>
 * java -cp benchmarks/target/benchmarks.jar dev.idempotency.benchmarks.MemoryFootprint [memory|redis|postgresql]
 * </pre>
 */
public final class MemoryFootprint {

  static final Duration TTL = Duration.ofHours(24);

  private MemoryFootprint() {}

  /**
   * Measures and prints.
   *
   * @param args ignored
   * @throws Exception on failure
   */
  public static void main(String[] args) throws Exception {
    String only = args.length > 0 ? args[0] : "all";
    if (only.equals("all") || only.equals("memory")) {
      inMemory(1_000_000);
    }
    if (only.equals("all") || only.equals("redis")) {
      redis(100_000);
    }
    if (only.equals("all") || only.equals("postgresql")) {
      postgres(20_000);
    }
  }

  static long usedHeap() throws InterruptedException {
    Runtime runtime = Runtime.getRuntime();
    for (int i = 0; i < 5; i++) {
      System.gc();
      Thread.sleep(100);
    }
    return runtime.totalMemory() - runtime.freeMemory();
  }

  static void inMemory(int keys) throws Exception {
    InMemoryKeyStore store = InMemoryKeyStore.builder().maximumSize(keys * 2L).build();
    IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
    String[] names = new String[keys];
    for (int i = 0; i < keys; i++) {
      names[i] = "otp:user_" + i + ":challenge";
    }
    long before = usedHeap();
    for (int i = 0; i < keys; i++) {
      guard.execute(names[i], TTL, ctx -> "n_0123456789abcd");
    }
    long after = usedHeap();
    System.out.printf(
        "in-memory: %d records, %.0f bytes of heap per record (Caffeine entry + record + digest + payload)%n",
        store.size(), (after - before) / (double) keys);
  }

  static void redis(int keys) {
    int port = FreePorts.next();
    RedisServer server = Backend.startRedis(port);
    RedisClient client = RedisClient.create(RedisURI.create("redis://127.0.0.1:" + port));
    try (RedisKeyStore store = RedisKeyStore.builder(client).build();
        StatefulRedisConnection<String, String> admin = client.connect()) {
      IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
      long total = 0;
      int sampled = 0;
      long before = Long.parseLong(info(admin.sync().info("memory")).get("used_memory"));
      for (int i = 0; i < keys; i++) {
        String key = "otp:user_" + i + ":challenge";
        guard.execute(key, TTL, ctx -> "n_0123456789abcd");
        if (i % 100 == 0) {
          total += admin.sync().memoryUsage(store.redisKey(IdempotencyKey.digest(key)));
          sampled++;
        }
      }
      long after = Long.parseLong(info(admin.sync().info("memory")).get("used_memory"));
      System.out.printf(
          "redis: MEMORY USAGE %.0f bytes per record (mean of %d); used_memory grew %.0f bytes per record%n",
          total / (double) sampled, sampled, (after - before) / (double) keys);
    } finally {
      client.shutdown();
      server.stop();
    }
  }

  static Map<String, String> info(String text) {
    Map<String, String> values = new java.util.HashMap<>();
    for (String line : text.split("\r?\n")) {
      int colon = line.indexOf(':');
      if (colon > 0) {
        values.put(line.substring(0, colon), line.substring(colon + 1).trim());
      }
    }
    return values;
  }

  static void postgres(int keys) throws Exception {
    try (EmbeddedPostgres postgres =
        EmbeddedPostgres.builder().setPGStartupWait(Duration.ofSeconds(120)).start()) {
      JdbcKeyStore store =
          JdbcKeyStore.builder(postgres.getPostgresDatabase()).createSchemaIfMissing(true).build();
      IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
      for (int i = 0; i < keys; i++) {
        guard.execute("otp:user_" + i + ":challenge", TTL, ctx -> "n_0123456789abcd");
      }
      Jdbi jdbi = Jdbi.create(postgres.getPostgresDatabase());
      jdbi.useHandle(h -> h.execute("VACUUM ANALYZE idempotency_records"));
      Map<String, Object> sizes =
          jdbi.withHandle(
              h ->
                  h.createQuery(
                          "SELECT pg_table_size('idempotency_records') AS table_bytes,"
                              + " pg_indexes_size('idempotency_records') AS index_bytes,"
                              + " (SELECT count(*) FROM idempotency_records) AS rows")
                      .mapToMap()
                      .one());
      long rows = ((Number) sizes.get("rows")).longValue();
      long table = ((Number) sizes.get("table_bytes")).longValue();
      long index = ((Number) sizes.get("index_bytes")).longValue();
      System.out.printf(
          "postgresql: %d rows, table %.0f + indexes %.0f = %.0f bytes per row%n",
          rows, table / (double) rows, index / (double) rows, (table + index) / (double) rows);
    }
  }
}
