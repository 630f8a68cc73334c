package dev.idempotency.jdbc;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.Batch;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.ResultCodec;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Probe (probe47, issue 37, fixpend45's one deadline per JDBC operation, SPEC 1 "no lost send"): a
 * batch claim on a real database (PostgreSQL 17, MariaDB 10.11) with {@code operationTimeout(1 s)}
 * of five new keys and one key whose lease lapsed (a crashed sender's row) while another
 * transaction holds that row locked ({@code SELECT ... FOR UPDATE}). The batch's insert-if-absent
 * commits the five new keys at once; the takeover of the lapsed key then waits on the row lock
 * until the operation's deadline cancels it, and the whole batch fails with {@code
 * KeyStoreException}: nothing is sent. The store then answers again (the lock is released) and the
 * same batch is tried again on the same thread (so it also checks that the timed-out operation left
 * no deadline behind on the thread).
 *
 * <p>The promise probed: the failed batch sent nothing and must not leave its new keys held, so
 * that the retry sends each of them (once). What happens: the five rows the failed operation
 * committed stay IN_PROGRESS under owner tokens no call holds, and every retry reports them in
 * flight until their lease (30 s by default) ends, although nobody is sending them.
 */
final class BatchDeadlineProbeCase {

  private static final Logger log = LoggerFactory.getLogger(BatchDeadlineProbeCase.class);

  private static final Duration TTL = Duration.ofHours(1);

  private BatchDeadlineProbeCase() {}

  static void aBatchThatTheDeadlineEndsAfterItsInsertLeavesNoKeyHeld(
      DataSource pool, String table, String database) throws Exception {
    JdbcKeyStore store =
        JdbcKeyStore.builder(pool)
            .tableName(table)
            .createSchemaIfMissing(true)
            .operationTimeout(Duration.ofSeconds(1))
            .build();
    try (IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build()) {
      String crashed = "crashed:" + UUID.randomUUID();
      // a sender that crashed: its row stays IN_PROGRESS under a token nobody holds, lease lapsed
      guard.execute(
          crashed,
          TTL,
          ctx -> {
            execute(
                pool,
                "UPDATE "
                    + table
                    + " SET owner_token = 'crashed', lease_until = 1 WHERE state = 'IN_PROGRESS'");
            return "crashed";
          });
      List<String> fresh = new ArrayList<>();
      for (int i = 0; i < 5; i++) {
        fresh.add("new:" + i + ":" + UUID.randomUUID());
      }
      List<IdempotencyRequest> requests = new ArrayList<>();
      for (String key : fresh) {
        requests.add(IdempotencyRequest.of(key, TTL));
      }
      requests.add(IdempotencyRequest.of(crashed, TTL));

      Map<String, Integer> sends = new LinkedHashMap<>();
      Set<String> reportedInFlight = new TreeSet<>();
      long failedAfterMillis;
      Map<String, String> firstRefusals = new LinkedHashMap<>();
      try (Connection holder = pool.getConnection()) {
        holder.setAutoCommit(false);
        try (Statement lock = holder.createStatement()) {
          lock.execute("SELECT key_id FROM " + table + " WHERE owner_token = 'crashed' FOR UPDATE");
        }
        long start = System.nanoTime();
        try (Batch<String> batch = guard.claimBatch(requests, ResultCodec.string())) {
          failedAfterMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
          sendAll(batch, sends);
          batch.refused().forEach((k, e) -> firstRefusals.put(k, e.getClass().getSimpleName()));
          reportedInFlight.addAll(batch.inFlight());
          batch.record();
        }
        holder.rollback();
      }
      log.info(
          "{}: locked batch: answered after {} ms, refused {}, sends {}",
          database,
          failedAfterMillis,
          firstRefusals,
          sends);

      // the store answers again; the breaker may refuse a few rounds until its probe closes it
      long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      int rounds = 0;
      while (!sends.keySet().containsAll(fresh) && System.nanoTime() - until < 0) {
        rounds++;
        try (Batch<String> batch = guard.claimBatch(requests, ResultCodec.string())) {
          sendAll(batch, sends);
          for (String key : batch.inFlight()) {
            if (fresh.contains(key)) {
              reportedInFlight.add(key);
            }
          }
          batch.record();
        }
        if (!sends.keySet().containsAll(fresh)) {
          TimeUnit.MILLISECONDS.sleep(100); // polling: the breaker's probe, bounded above
        }
      }
      log.info(
          "{}: after {} retry rounds: sends {}, new keys reported in flight {}",
          database,
          rounds,
          sends,
          reportedInFlight);

      assertThat(failedAfterMillis)
          .as("the locked batch is bounded by its one deadline")
          .isLessThan(LockTimeoutCase.BOUND_MILLIS);
      for (String key : fresh) {
        assertThat(sends.getOrDefault(key, 0))
            .as(
                "new key %s: sent once within 10 s of the store answering again (in flight: %s)",
                key, reportedInFlight)
            .isEqualTo(1);
      }
      assertThat(reportedInFlight)
          .as("no call sends the new keys, so none may be reported in flight")
          .isEmpty();
    }
  }

  private static void sendAll(Batch<String> batch, Map<String, Integer> sends) {
    for (Batch.Item item : batch.toSend()) {
      sends.merge(item.key(), 1, Integer::sum);
      batch.succeeded(item, "sent " + item.key());
    }
  }

  private static void execute(DataSource pool, String sql) {
    try (Connection connection = pool.getConnection();
        Statement statement = connection.createStatement()) {
      statement.execute(sql);
    } catch (java.sql.SQLException e) {
      throw new IllegalStateException(e);
    }
  }
}
