package dev.idempotency.jdbc;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.Batch;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.KeyStoreException;
import dev.idempotency.ResultCodec;
import dev.idempotency.TakeoverPolicy;
import dev.idempotency.tck.MutableClock;
import dev.idempotency.testservers.Poll;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * probeC's finding on the failed-batch undo (fixbatch: {@code BatchClaimUndo}), fixed by the
 * guard's take-back of claims it gave up on (fixstall: {@code UnsentClaims}), when the undo itself
 * cannot run: the batch's connection is terminated ({@code pg_terminate_backend}) while its
 * takeover of a lapsed key waits on a row lock, after its insert of five new keys committed.
 * docs/stores.md says those rows then "stay held until their lease ends, as after a crash". Checked
 * against SPEC 1 (no key held with nothing sent): the caller was told the batch failed and nothing
 * was sent; once the lease has run out, a retry must send each key once, in the default mode and in
 * strict mode ({@link TakeoverPolicy#REFUSE}), where "as after a crash" would mean an unknown
 * outcome for the whole window for keys that were never sent. The guard's fenced take-back of the
 * batch's claims frees them; before it, strict mode refused the 2 keys retried there for their
 * window. Time is the guards' clock (the JDBC store takes it from the guard), moved by hand.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class PostgresBatchUndoConnectionLostTest {

  static final String DATABASE = "batch_undo_probe";
  static final String TABLE = "undo_probe";
  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofSeconds(30);

  private HikariDataSource pool;

  @BeforeAll
  void start() {
    pool = SharedPostgres.pool(DATABASE, 6);
  }

  @AfterAll
  void stop() {
    if (pool != null) {
      pool.close();
    }
  }

  @Test
  void keysOfABatchWhoseUndoWasCutOffAreSentOnceAfterTheLeaseInDefaultAndStrictMode()
      throws Exception {
    MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
    JdbcKeyStore store =
        JdbcKeyStore.builder(pool)
            .tableName(TABLE)
            .createSchemaIfMissing(true)
            .operationTimeout(Duration.ofSeconds(20))
            .build();
    Map<String, AtomicInteger> sends = new ConcurrentHashMap<>();
    try (IdempotencyGuard guard = guard(store, clock, TakeoverPolicy.TAKE_OVER);
        IdempotencyGuard strict = guard(store, clock, TakeoverPolicy.REFUSE)) {
      String crashed = "crashed:" + UUID.randomUUID();
      CrashedSenders.crash(guard, pool, TABLE, crashed, "crashed");
      clock.advance(LEASE.plusSeconds(1)); // the crashed sender's lease lapsed
      List<String> fresh = new ArrayList<>();
      List<IdempotencyRequest> requests = new ArrayList<>();
      for (int i = 0; i < 4; i++) {
        String key = "fresh:" + i + ":" + UUID.randomUUID();
        fresh.add(key);
        requests.add(IdempotencyRequest.of(key, TTL));
      }
      requests.add(IdempotencyRequest.of(crashed, TTL));

      Map<String, String> refused;
      int sentInBatch;
      try (Connection holder = pool.getConnection()) {
        holder.setAutoCommit(false);
        try (PreparedStatement lock =
            holder.prepareStatement(
                "SELECT key_id FROM " + TABLE + " WHERE owner_token = 'crashed' FOR UPDATE")) {
          assertThat(lock.executeQuery().next()).as("the crashed row, locked").isTrue();
        }
        CompletableFuture<Batch<String>> batch =
            CompletableFuture.supplyAsync(() -> guard.claimBatch(requests, ResultCodec.string()));
        int terminated = terminateTheBackendWaitingOnALock(batch);
        assertThat(terminated).as("the batch's backend, terminated while it waited").isEqualTo(1);
        try (Batch<String> failed = batch.get(30, TimeUnit.SECONDS)) {
          sentInBatch = 0;
          for (Batch.Item item : failed.toSend()) {
            sentInBatch++;
            failed.succeeded(item, "sent");
          }
          refused = new java.util.TreeMap<>();
          failed.refused().forEach((k, e) -> refused.put(k, e.getClass().getSimpleName()));
          failed.record();
        }
        holder.rollback();
      }
      assertThat(sentInBatch).as("nothing handed out by the failed batch").isZero();
      assertThat(refused).as("every key refused by the failed batch").hasSize(requests.size());
      int held = heldByTheBatch();
      // the guard takes the failed batch's claims back in the background (UnsentClaims): wait for
      // it before the retries, which would otherwise race it (strict mode refuses a held key)
      Poll.within(Duration.ofSeconds(30))
          .every(Duration.ofMillis(50))
          .until("the failed batch's claims taken back", this::heldByTheBatch, n -> n == 0);

      clock.advance(LEASE.plusSeconds(1)); // the failed batch's leases, if any, have run out
      List<String> outcomes = new ArrayList<>();
      // half the keys retried in default mode, half in strict mode
      for (int i = 0; i < fresh.size(); i++) {
        String key = fresh.get(i);
        IdempotencyGuard retry = i % 2 == 0 ? guard : strict;
        outcomes.add(key + ": " + retry(retry, key, sends));
      }
      for (String key : fresh) {
        assertThat(sends.get(key))
            .as(
                "%s, never sent by the failed batch (rows held after it: %d of %d), is sent once"
                    + " by a retry after the lease; retries: %s",
                key, held, fresh.size(), outcomes)
            .isNotNull()
            .hasValue(1);
      }
    }
  }

  /**
   * Calls the key until the store answers (the guard's breaker refuses calls for a while after the
   * failed batch: a {@link KeyStoreException}), for 10 s at most; what the last call gave.
   */
  private static String retry(IdempotencyGuard guard, String key, Map<String, AtomicInteger> sends)
      throws InterruptedException {
    long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    String last = "not called";
    while (System.nanoTime() - until < 0) {
      try {
        guard.execute(key, TTL, ctx -> send(sends, key));
        return "ok";
      } catch (KeyStoreException storeRefused) {
        last = storeRefused.getClass().getSimpleName();
        TimeUnit.MILLISECONDS.sleep(100); // polling: the breaker's probe, bounded above
      } catch (RuntimeException e) {
        return e.getClass().getSimpleName();
      }
    }
    return last;
  }

  private static IdempotencyGuard guard(
      JdbcKeyStore store, MutableClock clock, TakeoverPolicy policy) {
    return IdempotencyGuard.builder()
        .store(store)
        .clock(clock)
        .lease(LEASE)
        .inFlightWait(Duration.ZERO)
        .takeoverPolicy(policy)
        .build();
  }

  /** Polls (bounded) for the batch's backend waiting on the row lock, and terminates it. */
  private int terminateTheBackendWaitingOnALock(CompletableFuture<?> batch) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (System.nanoTime() - deadline < 0 && !batch.isDone()) {
      try (Connection connection = pool.getConnection();
          Statement statement = connection.createStatement();
          ResultSet rows =
              statement.executeQuery(
                  "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '"
                      + DATABASE
                      + "' AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()")) {
        int terminated = 0;
        while (rows.next()) {
          terminated += rows.getBoolean(1) ? 1 : 0;
        }
        if (terminated > 0) {
          return terminated;
        }
      }
      TimeUnit.MILLISECONDS.sleep(20); // polling, bounded above
    }
    return 0;
  }

  /** The rows in progress but the crashed sender's. */
  private int heldByTheBatch() throws Exception {
    return (int)
        CrashedSenders.inProgressRows(pool, TABLE).values().stream()
            .filter(row -> !row.startsWith("crashed/"))
            .count();
  }

  private static String send(Map<String, AtomicInteger> sends, String key) {
    sends.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
    return "sent " + key;
  }
}
