package dev.idempotency.jdbc;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.Batch;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRecord;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.ResultCodec;
import dev.idempotency.testservers.ChildJvm;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.ConcurrentModificationException;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * Probe (probeV; SPEC 1) of {@code Batch} on a real PostgreSQL from two JVMs at once, as
 * RedisBatchTwoJvmProbeTest does on Redis: each JVM runs threads that claim overlapping batches of
 * the same 1,000 keys (and single {@code execute} calls on them), send each handed-out key on a
 * pool of sender threads, fail about one send in eight (released, retried later), and call {@code
 * record()} once every send of the batch reported (the documented usage), until every key is
 * completed. The provider counts its sends per key in a table of its own (an upsert), shared by
 * both JVMs. What must hold: each key sent exactly once, every key {@code COMPLETED} at the end, no
 * {@code ConcurrentModificationException}.
 *
 * <p>Passes on main a8f923a (1/1; e.g. parent 220 batches, 550 batch sends, 99 refused; child 140
 * batches, 295 batch sends; the rest by single calls: each of the 1,000 keys sent once and
 * completed). About 20 s.
 */
class PostgresBatchTwoJvmProbeTest {

  static final int KEYS = 1000;
  static final Duration TTL = Duration.ofHours(1);
  static final String TABLE = "probev_batch_records";
  static final String SENT = "probev_batch_sent";

  @Test
  void twoJvmsSendEachKeyOnceThroughOverlappingBatches() throws Exception {
    String url = SharedPostgres.jdbcUrl("probev_batch_two_jvms");
    String prefix = "probeV-batch:" + UUID.randomUUID() + ":";
    try (HikariDataSource pool = Pools.of(url, 4);
        Connection connection = pool.getConnection();
        Statement statement = connection.createStatement()) {
      statement.execute(
          "CREATE TABLE IF NOT EXISTS " + SENT + " (k TEXT PRIMARY KEY, n INT NOT NULL)");
    }
    ChildJvm child = ChildJvm.start(PostgresBatchTwoJvmProbeTest.class, url, prefix);
    Map<String, Integer> parent = run(url, prefix, Duration.ofSeconds(150), child::go);
    assertThat(child.waitFor(Duration.ofSeconds(200)))
        .as("the child JVM ended; stderr: %s", child.stderr())
        .isTrue();
    String childSummary = child.output();
    System.out.println(
        "probeV batch race (PostgreSQL): parent " + parent + "; child " + childSummary);

    try (HikariDataSource pool = Pools.of(url, 4)) {
      Map<String, Integer> sends = new HashMap<>();
      try (Connection connection = pool.getConnection();
          PreparedStatement select =
              connection.prepareStatement("SELECT k, n FROM " + SENT + " WHERE k LIKE ?")) {
        select.setString(1, prefix + "%");
        try (ResultSet rows = select.executeQuery()) {
          while (rows.next()) {
            sends.put(rows.getString(1), rows.getInt(2));
          }
        }
      }
      JdbcKeyStore store = JdbcKeyStore.builder(pool).tableName(TABLE).build();
      try (IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build()) {
        Map<String, String> wrong = new LinkedHashMap<>();
        for (int i = 0; i < KEYS; i++) {
          String key = prefix + i;
          Optional<IdempotencyRecord> record = guard.find(key);
          String state = record.map(r -> r.state().name()).orElse("absent");
          Integer n = sends.get(key);
          if (n == null || n != 1 || !state.equals("COMPLETED")) {
            wrong.put(key, "sends " + n + ", " + state);
          }
        }
        assertThat(wrong)
            .as(
                "keys not sent exactly once or not completed (parent %s; child %s; stderr %s)",
                parent, childSummary, child.stderr())
            .isEmpty();
      }
    }
    assertThat(parent.get("concurrentModification")).as("parent %s", parent).isZero();
    assertThat(childSummary).as("child").contains("concurrentModification=0");
    assertThat(child.exitValue()).as("child %s; stderr %s", childSummary, child.stderr()).isZero();
  }

  /** The child JVM: the same run; prints its counts. */
  public static void main(String[] args) throws Exception {
    ChildJvm.exitWithCounts(
        run(args[0], args[1], Duration.ofSeconds(150), ChildJvm::readyThenAwaitGo));
  }

  /** Runs the batches of one JVM until every key is completed or {@code within} passed. */
  static Map<String, Integer> run(String url, String prefix, Duration within, Runnable whenReady)
      throws Exception {
    Map<String, AtomicInteger> counts = new ConcurrentHashMap<>();
    for (String name :
        List.of(
            "batches",
            "handedOut",
            "sent",
            "failed",
            "executes",
            "noSuchElement",
            "concurrentModification",
            "errors")) {
      counts.put(name, new AtomicInteger());
    }
    HikariDataSource pool = Pools.of(url, 12);
    JdbcKeyStore store =
        JdbcKeyStore.builder(pool).tableName(TABLE).createSchemaIfMissing(true).build();
    IdempotencyGuard guard =
        IdempotencyGuard.builder()
            .store(store)
            .lease(Duration.ofSeconds(10))
            .inFlightWait(Duration.ZERO)
            .build();
    ExecutorService senders = Executors.newFixedThreadPool(4);
    ExecutorService loops = Executors.newFixedThreadPool(4);
    guard.find(prefix + 0); // connected
    whenReady.run();
    long deadline = System.nanoTime() + within.toNanos();
    List<Future<?>> running = new ArrayList<>();
    try {
      for (int t = 0; t < 4; t++) {
        boolean singles = t == 3;
        running.add(
            loops.submit(
                () -> {
                  int round = 0;
                  while (System.nanoTime() < deadline
                      && (round++ % 20 != 0 || !allCompleted(guard, prefix))) {
                    try {
                      if (singles) {
                        single(guard, pool, prefix, counts);
                      } else {
                        batch(guard, pool, prefix, senders, counts);
                      }
                    } catch (ConcurrentModificationException e) {
                      counts.get("concurrentModification").incrementAndGet();
                    } catch (RuntimeException e) {
                      counts.get("errors").incrementAndGet();
                    }
                  }
                  return null;
                }));
      }
      for (Future<?> loop : running) {
        loop.get(within.toSeconds() + 60, TimeUnit.SECONDS);
      }
    } finally {
      loops.shutdownNow();
      senders.shutdown();
      senders.awaitTermination(30, TimeUnit.SECONDS);
      guard.close();
      pool.close();
    }
    Map<String, Integer> result = new LinkedHashMap<>();
    counts.forEach((name, n) -> result.put(name, n.get()));
    return result;
  }

  private static boolean allCompleted(IdempotencyGuard guard, String prefix) {
    for (int i = 0; i < KEYS; i++) {
      Optional<IdempotencyRecord> record = guard.find(prefix + i);
      if (record.isEmpty() || !record.get().state().name().equals("COMPLETED")) {
        return false;
      }
    }
    return true;
  }

  /** The provider: counts the send in its table; about one send in eight fails before it. */
  private static String send(HikariDataSource pool, String key, AtomicInteger failed) {
    if (ThreadLocalRandom.current().nextInt(8) == 0) {
      failed.incrementAndGet();
      throw new IllegalStateException("the provider refused (nothing sent)");
    }
    try (Connection connection = pool.getConnection();
        PreparedStatement upsert =
            connection.prepareStatement(
                "INSERT INTO "
                    + SENT
                    + " (k, n) VALUES (?, 1) ON CONFLICT (k) DO UPDATE SET n = "
                    + SENT
                    + ".n + 1")) {
      upsert.setString(1, key);
      upsert.executeUpdate();
    } catch (SQLException e) {
      throw new IllegalStateException("the provider's count failed: " + e, e);
    }
    return "sent-" + key;
  }

  private static List<IdempotencyRequest> someKeys(String prefix) {
    List<Integer> all = new ArrayList<>();
    for (int i = 0; i < KEYS; i++) {
      all.add(i);
    }
    Collections.shuffle(all);
    List<IdempotencyRequest> requests = new ArrayList<>();
    for (int i : all.subList(0, 25)) {
      requests.add(IdempotencyRequest.of(prefix + i, TTL));
    }
    return requests;
  }

  private static void single(
      IdempotencyGuard guard,
      HikariDataSource pool,
      String prefix,
      Map<String, AtomicInteger> counts) {
    String key = prefix + ThreadLocalRandom.current().nextInt(KEYS);
    counts.get("executes").incrementAndGet();
    try {
      guard.execute(key, TTL, ctx -> send(pool, key, counts.get("failed")));
    } catch (RuntimeException expected) {
      // in progress elsewhere, or the provider refused: a later call retries
    }
  }

  private static void batch(
      IdempotencyGuard guard,
      HikariDataSource pool,
      String prefix,
      ExecutorService senders,
      Map<String, AtomicInteger> counts)
      throws Exception {
    counts.get("batches").incrementAndGet();
    try (Batch<String> batch = guard.claimBatch(someKeys(prefix), ResultCodec.string())) {
      List<Future<?>> sends = new ArrayList<>();
      try {
        for (Batch.Item item : batch.toSend()) {
          counts.get("handedOut").incrementAndGet();
          sends.add(
              senders.submit(
                  () -> {
                    try {
                      String receipt = send(pool, item.key(), counts.get("failed"));
                      batch.succeeded(item, receipt);
                      counts.get("sent").incrementAndGet();
                    } catch (IllegalStateException refused) {
                      batch.failed(item, refused);
                    }
                  }));
        }
      } catch (NoSuchElementException lapsed) {
        counts.get("noSuchElement").incrementAndGet();
      }
      for (Future<?> send : sends) {
        send.get(60, TimeUnit.SECONDS);
      }
      batch.record();
    }
  }
}
