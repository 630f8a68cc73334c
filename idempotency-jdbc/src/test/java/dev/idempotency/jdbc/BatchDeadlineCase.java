package dev.idempotency.jdbc;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.Batch;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.ResultCodec;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
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
 * A batch claim that fails part way must leave no key held (issue 37, found by probe47; SPEC 1, the
 * SPI's {@code claimAll}: a batch that throws claimed nothing). On a real database with {@code
 * operationTimeout(1 s)}: a batch of five new keys, a key whose lease lapsed (a crashed sender's
 * row, nobody locks it) and a second lapsed key whose row another transaction holds locked ({@code
 * SELECT ... FOR UPDATE} by its primary key). On PostgreSQL and MariaDB the batch inserts the new
 * keys and takes the free lapsed key over, each statement committed at once; the takeover of the
 * locked key then waits until the operation's deadline cancels it, and the whole batch fails with
 * {@code KeyStoreException}: nothing is sent. On H2 a batch is claimed key by key, and only the
 * locked key fails (reported in flight: a transaction holds it).
 *
 * <p>Checked: right after the locked batch no row is in progress but the two crashed senders', as
 * they were (before the fix the five new rows and the free lapsed key stayed in progress under
 * owner tokens no call held, and every retry was told they were in flight until their 30 s lease
 * ended); then, the lock released, the same batch retried on the same thread (so the timed-out
 * operation must have left no deadline on it) sends each key once within 10 s, both lapsed keys at
 * attempt 2, and reports none in flight.
 */
final class BatchDeadlineCase {

  private static final Logger log = LoggerFactory.getLogger(BatchDeadlineCase.class);

  private static final Duration TTL = Duration.ofHours(1);

  /** The owner token of the crashed sender whose row another transaction holds locked. */
  private static final String LOCKED_TOKEN = "crashed-locked";

  /** The owner token of the crashed sender whose row nobody locks. */
  private static final String FREE_TOKEN = "crashed-free";

  private BatchDeadlineCase() {}

  static void aBatchThatTheDeadlineEndsAfterItsInsertLeavesNoKeyHeld(
      DataSource pool, String table, String database) throws Exception {
    JdbcKeyStore store =
        JdbcKeyStore.builder(pool)
            .tableName(table)
            .createSchemaIfMissing(true)
            .operationTimeout(Duration.ofSeconds(1))
            .build();
    try (IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build()) {
      // two senders that crashed: their rows stay IN_PROGRESS under tokens nobody holds, lapsed
      String crashed = "crashed:" + UUID.randomUUID();
      String lapsed = "lapsed:" + UUID.randomUUID();
      CrashedSenders.crashWithLapsedLease(guard, pool, table, crashed, LOCKED_TOKEN);
      CrashedSenders.crashWithLapsedLease(guard, pool, table, lapsed, FREE_TOKEN);
      List<String> fresh = new ArrayList<>();
      for (int i = 0; i < 5; i++) {
        fresh.add("new:" + i + ":" + UUID.randomUUID());
      }
      List<IdempotencyRequest> requests = new ArrayList<>();
      for (String key : fresh) {
        requests.add(IdempotencyRequest.of(key, TTL));
      }
      // the free lapsed key is taken over before the batch reaches the locked one
      requests.add(IdempotencyRequest.of(lapsed, TTL));
      requests.add(IdempotencyRequest.of(crashed, TTL));
      List<String> all = new ArrayList<>(fresh);
      all.add(lapsed);
      all.add(crashed);

      Map<String, Integer> sends = new LinkedHashMap<>();
      Map<String, Integer> attempts = new LinkedHashMap<>();
      Set<String> lockedRoundInFlight = new TreeSet<>();
      Set<String> reportedInFlight = new TreeSet<>();
      long failedAfterMillis;
      Map<String, String> firstRefusals = new LinkedHashMap<>();
      Map<String, String> heldAfterFailure;
      Set<String> sentInLockedRound;
      try (Connection holder = pool.getConnection()) {
        holder.setAutoCommit(false);
        // the crashed row alone, by its primary key (a record lock on InnoDB, no gap locks)
        try (PreparedStatement lock =
            holder.prepareStatement(
                "SELECT key_id FROM " + table + " WHERE key_id = ? FOR UPDATE")) {
          lock.setString(1, keyIdOwnedBy(pool, table, LOCKED_TOKEN));
          lock.executeQuery().close();
        }
        long start = System.nanoTime();
        try (Batch<String> batch = guard.claimBatch(requests, ResultCodec.string())) {
          failedAfterMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
          sendAll(batch, sends, attempts);
          batch.refused().forEach((k, e) -> firstRefusals.put(k, e.getClass().getSimpleName()));
          lockedRoundInFlight.addAll(batch.inFlight());
          batch.record();
        }
        sentInLockedRound = new TreeSet<>(sends.keySet());
        heldAfterFailure = CrashedSenders.inProgressRows(pool, table);
        holder.rollback();
      }
      log.info(
          "{}: locked batch: answered after {} ms, refused {}, in flight {}, sends {},"
              + " rows in progress {}",
          database,
          failedAfterMillis,
          firstRefusals,
          lockedRoundInFlight,
          sends,
          heldAfterFailure.values());

      // the store answers again; the breaker may refuse a few rounds until its probe closes it
      long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      int rounds = 0;
      while (!sends.keySet().containsAll(all) && System.nanoTime() - until < 0) {
        rounds++;
        try (Batch<String> batch = guard.claimBatch(requests, ResultCodec.string())) {
          sendAll(batch, sends, attempts);
          reportedInFlight.addAll(batch.inFlight());
          batch.record();
        }
        if (!sends.keySet().containsAll(all)) {
          TimeUnit.MILLISECONDS.sleep(100); // polling: the breaker's probe, bounded above
        }
      }
      log.info(
          "{}: after {} retry rounds: sends {}, attempts {}, reported in flight {}",
          database,
          rounds,
          sends,
          attempts,
          reportedInFlight);

      assertThat(failedAfterMillis)
          .as("the locked batch is bounded by its one deadline")
          .isLessThan(LockTimeoutCase.BOUND_MILLIS);
      assertThat(heldAfterFailure.values())
          .as(
              "rows in progress once the locked batch was answered: only the two crashed senders',"
                  + " as they were (no row held by a token no call holds)")
          .allMatch(row -> row.equals(LOCKED_TOKEN + "/1") || row.equals(FREE_TOKEN + "/1"))
          .contains(LOCKED_TOKEN + "/1");
      if (!sentInLockedRound.contains(lapsed)) {
        assertThat(heldAfterFailure.values())
            .as("the free lapsed key, not sent in the locked round, is given back to its owner")
            .contains(FREE_TOKEN + "/1");
      }
      for (String key : all) {
        assertThat(sends.getOrDefault(key, 0))
            .as(
                "%s: sent once within 10 s of the store answering again (in flight: %s)",
                key, reportedInFlight)
            .isEqualTo(1);
      }
      assertThat(attempts.get(lapsed)).as("the free lapsed key, taken over once").isEqualTo(2);
      assertThat(attempts.get(crashed)).as("the locked lapsed key, taken over once").isEqualTo(2);
      assertThat(lockedRoundInFlight)
          .as("in flight in the locked round: at most the locked key (H2 reports it so)")
          .isSubsetOf(crashed);
      assertThat(reportedInFlight)
          .as("no call sends these keys while the batch is retried, so none may be in flight")
          .isEmpty();
    }
  }

  private static String keyIdOwnedBy(DataSource pool, String table, String token)
      throws SQLException {
    try (Connection connection = pool.getConnection();
        PreparedStatement select =
            connection.prepareStatement("SELECT key_id FROM " + table + " WHERE owner_token = ?")) {
      select.setString(1, token);
      try (ResultSet rows = select.executeQuery()) {
        assertThat(rows.next()).as("the crashed sender's row").isTrue();
        return rows.getString(1);
      }
    }
  }

  private static void sendAll(
      Batch<String> batch, Map<String, Integer> sends, Map<String, Integer> attempts) {
    for (Batch.Item item : batch.toSend()) {
      sends.merge(item.key(), 1, Integer::sum);
      attempts.put(item.key(), item.context().attempt());
      batch.succeeded(item, "sent " + item.key());
    }
  }
}
