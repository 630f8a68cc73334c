package dev.idempotency.jdbc;

import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.ExtendRequest;
import java.time.Instant;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.jdbi.v3.core.argument.Argument;
import org.jdbi.v3.core.statement.Query;

/**
 * PostgreSQL 12 or newer: a claim is one statement (insert-if-absent and select in one CTE), a
 * batch is inserted first and only the keys it did not insert are read, the outcomes and renewals
 * of a batch are one statement each, all by one array parameter per column, and concurrent purgers
 * skip each other's rows.
 */
final class PostgresStatements extends Statements {

  /**
   * The insert-if-absent and the select in one statement, so that a replay costs one statement. It
   * always returns one row: {@code inserted} is 1 when the row was inserted; otherwise the row as
   * the statement's snapshot sees it, all nulls if not visible there.
   */
  private final PlainStatement insertOrSelect;

  /**
   * The rows of a batch by one array parameter, {@code keyIds}, each looked up on its own by the
   * primary key ({@code LATERAL ... OFFSET 0} keeps the planner from turning it into a join). One
   * statement for every batch size, with one plan whatever the sizes of the batch and the table:
   * with an {@code IN} list or {@code = ANY}, a plan cached while the table was small (a sequential
   * scan) stays in use as it grows, and every batch then reads the whole table (measured: 500 ms
   * per batch of 500 at 20,000 rows).
   */
  private final String selectAny;

  /**
   * The insert-if-absent of a batch, its rows given as one array parameter per column ({@code
   * keyIds}, {@code ownerTokens}, {@code fingerprints}, {@code debugKeys}), so that one statement
   * serves every batch size; it returns the key and owner token of each row it inserted. A key
   * twice in a batch is inserted once, by its first request: the second conflicts with the first.
   */
  private final String insertAllReturning;

  /**
   * The outcomes of a batch of distinct keys, one array parameter per column ({@code keyIds},
   * {@code ownerTokens}, {@code states}, {@code payloads}, {@code nows}), each row fenced by its
   * owner token as the single-row {@link #complete} is; it returns the position in the batch (from
   * 1) of each row it changed.
   */
  private final String completeAllAtOnce;

  /**
   * The renewals of a batch of distinct keys, one array parameter per column ({@code keyIds},
   * {@code ownerTokens}, {@code leases}, {@code nows}), each row fenced by its owner token as the
   * single-row {@link #extend} is; it returns the position in the batch (from 1) of each row it
   * changed.
   */
  private final String extendAllAtOnce;

  PostgresStatements(String table, boolean databaseTime, boolean synchronousOutcomes) {
    super(table, databaseTime, synchronousOutcomes);
    String now = now();
    String batchNow = databaseTime ? databaseNow() : "b.now_millis";
    completeAllAtOnce =
        "UPDATE "
            + table
            + " AS t SET state = b.state, payload = b.payload, completed_at = "
            + batchNow
            + " FROM unnest(CAST(:keyIds AS VARCHAR[]), CAST(:ownerTokens AS VARCHAR[]),"
            + " CAST(:states AS VARCHAR[]), CAST(:payloads AS BYTEA[]), CAST(:nows AS BIGINT[]))"
            + " WITH ORDINALITY AS b(key_id, owner_token, state, payload, now_millis, batch_index)"
            + " WHERE t.key_id = b.key_id AND t.owner_token = b.owner_token"
            + " AND t.state = 'IN_PROGRESS'"
            + (synchronousOutcomes ? "" : deferredFlush())
            + " RETURNING b.batch_index";
    extendAllAtOnce =
        "UPDATE "
            + table
            + " AS t SET lease_until = "
            + neverBack(batchNow + " + b.lease_millis")
            + ", retain_until = "
            + lastingAtLeast(batchNow + " + b.lease_millis")
            + " FROM unnest(CAST(:keyIds AS VARCHAR[]), CAST(:ownerTokens AS VARCHAR[]),"
            + " CAST(:leases AS BIGINT[]), CAST(:nows AS BIGINT[]))"
            + " WITH ORDINALITY AS b(key_id, owner_token, lease_millis, now_millis, batch_index)"
            // fenced by the owner token alone, as the single-row extend: not by the renewer's clock
            + " WHERE t.key_id = b.key_id AND t.owner_token = b.owner_token"
            + " AND t.state = 'IN_PROGRESS'"
            + " RETURNING b.batch_index";
    insertAllReturning =
        "INSERT INTO "
            + table
            + " ("
            + COLUMNS
            + ") SELECT b.key_id, 'IN_PROGRESS', b.owner_token, 1, b.fingerprint, NULL, "
            + now
            + ", NULL, "
            + now
            + " + "
            + bigint("leaseMillis")
            + ", "
            + now
            + " + "
            + bigint("retentionMillis")
            + ", b.debug_key FROM unnest(CAST(:keyIds AS VARCHAR[]),"
            + " CAST(:ownerTokens AS VARCHAR[]), CAST(:fingerprints AS VARCHAR[]),"
            + " CAST(:debugKeys AS VARCHAR[])) AS b(key_id, owner_token, fingerprint, debug_key)"
            + " ON CONFLICT DO NOTHING RETURNING key_id, owner_token";
    insertOrSelect =
        new PlainStatement(
            "WITH ins AS ("
                + insertIfAbsent(claimValues())
                + " RETURNING 1) SELECT (SELECT count(*) FROM ins) AS inserted, "
                + READ
                + ", "
                + now()
                + " AS db_now FROM (SELECT 1) AS one LEFT JOIN "
                + table
                + " ON key_id = :keyId");
    selectAny =
        "SELECT r.*, "
            + now()
            + " AS db_now FROM unnest(CAST(:keyIds AS VARCHAR[])) AS k(id) CROSS JOIN LATERAL"
            + " (SELECT "
            + READ
            + ", key_id FROM "
            + table
            + " WHERE key_id = k.id OFFSET 0) AS r";
  }

  /**
   * {@code synchronous_commit} off for the completion's own transaction only ({@code set_config}
   * with {@code is_local}), set as the matched row is read, so that the commit does not wait for
   * the WAL flush. PostgreSQL decides at commit time; the setting ends with the transaction.
   */
  @Override
  String deferredFlush() {
    return " AND set_config('synchronous_commit', 'off', true) = 'off'";
  }

  @Override
  String databaseNow() {
    return "CAST(EXTRACT(EPOCH FROM statement_timestamp()) * 1000 AS BIGINT)";
  }

  @Override
  String insertIfAbsent(String values) {
    return "INSERT INTO "
        + table
        + " ("
        + COLUMNS
        + ") VALUES ("
        + values
        + ") ON CONFLICT DO NOTHING";
  }

  @Override
  String insertAllIfAbsent(String rows) {
    return "INSERT INTO " + table + " (" + COLUMNS + ") VALUES " + rows + " ON CONFLICT DO NOTHING";
  }

  /**
   * Finds up to {@code :limit} expired rows through the retention index, locks them (skipping rows
   * another purger holds), and deletes them by their physical address ({@code ctid}, a TID scan),
   * not by a second lookup per row through the primary key: at ten million rows that lookup, one
   * random index descent per row, cost most of a purge (BENCHMARKS.md, run 11). The locks keep the
   * addresses valid until the delete, in the same statement. The window is checked again on the
   * rows deleted, so that on a table a user has partitioned (where a {@code ctid} names a row only
   * within its partition) a row of another partition at the same address is deleted only if it has
   * expired too; that check is written {@code retain_until + 0} so that it stays a filter on the
   * TID scan: as an index condition the planner may prefer the retention index for the outer scan
   * too, which walks every expired row to find the batch's. {@code ORDER BY retain_until} keeps the
   * inner scan on the retention index whatever the estimates: without it, a generic plan (the
   * driver prepares the statement after a few runs) may scan the whole table for its batch, and
   * did, for more than the operation timeout, on the last, empty batch of a purge of a million rows
   * from eleven million.
   */
  @Override
  String transactionId() {
    return "SELECT CAST(txid_current_if_assigned() AS TEXT)";
  }

  @Override
  String readLockWait() {
    return "SELECT current_setting('lock_timeout')";
  }

  /**
   * {@code SET LOCAL}, with a bound value: it ends with the transaction, and is restored sooner.
   */
  @Override
  String setLockWait() {
    return "SELECT set_config('lock_timeout', :lockWait, true)";
  }

  /** Milliseconds as text, at least 1 (0 would wait for ever). */
  @Override
  Object lockWaitValue(java.time.Duration wait) {
    return Long.toString(Math.max(1, wait.toMillis()));
  }

  /** {@code lock_not_available} (55P03): the transaction is aborted, and must be rolled back. */
  @Override
  boolean isLockWaitTimeout(java.sql.SQLException failure) {
    return "55P03".equals(failure.getSQLState());
  }

  @Override
  String purge() {
    return "DELETE FROM "
        + table
        + " WHERE ctid = ANY(ARRAY(SELECT ctid FROM "
        + table
        + " WHERE retain_until <= "
        + now()
        + " ORDER BY retain_until LIMIT :limit FOR UPDATE SKIP LOCKED)) AND retain_until + 0 <= "
        + now();
  }

  /**
   * One statement, run as a {@link PlainStatement} (every first send and replay runs it); if the
   * conflicting row is not in its snapshot the row comes back empty.
   */
  @Override
  Rows.InsertOrRow insertOrRead(
      java.sql.Connection connection, StatementWatchdog watchdog, ClaimRequest request) {
    return insertOrSelect.query(
        connection,
        watchdog,
        claimParameters(request),
        rows -> {
          if (!rows.next()) {
            throw new IllegalStateException("the claim statement returned no row");
          }
          return Rows.InsertOrRow.read(rows);
        });
  }

  @Override
  boolean insertsBatchesFirst() {
    return true;
  }

  @Override
  Map<String, String> insertAllReturningOwners(
      org.jdbi.v3.core.Handle handle, List<ClaimRequest> requests) {
    List<String> keyIds = new ArrayList<>(requests.size());
    List<String> ownerTokens = new ArrayList<>(requests.size());
    List<String> fingerprints = new ArrayList<>(requests.size());
    List<String> debugKeys = new ArrayList<>(requests.size());
    for (ClaimRequest request : requests) {
      keyIds.add(request.keyId());
      ownerTokens.add(request.ownerToken());
      fingerprints.add(request.fingerprint());
      debugKeys.add(request.debugKey());
    }
    ClaimRequest first = requests.get(0);
    var insert =
        handle
            .createQuery(insertAllReturning)
            .bindArray("keyIds", String.class, keyIds)
            .bindArray("ownerTokens", String.class, ownerTokens)
            .bindArray("fingerprints", String.class, fingerprints)
            .bindArray("debugKeys", String.class, debugKeys)
            .bind("leaseMillis", first.lease().toMillis())
            .bind("retentionMillis", first.retention().toMillis());
    bindNow(insert, first.now());
    Map<String, String> inserted = new HashMap<>();
    insert
        .map((rs, ctx) -> Map.entry(rs.getString("key_id"), rs.getString("owner_token")))
        .forEach(row -> inserted.put(row.getKey(), row.getValue()));
    return inserted;
  }

  @Override
  boolean updatesBatchesAtOnce() {
    return true;
  }

  @Override
  BitSet completeAllAtOnce(org.jdbi.v3.core.Handle handle, List<CompleteRequest> requests) {
    int size = requests.size();
    String[] keyIds = new String[size];
    String[] ownerTokens = new String[size];
    String[] states = new String[size];
    byte[][] payloads = new byte[size][];
    Long[] nows = new Long[size];
    for (int i = 0; i < size; i++) {
      CompleteRequest request = requests.get(i);
      keyIds[i] = request.keyId();
      ownerTokens[i] = request.ownerToken();
      states[i] = request.state().name();
      payloads[i] = request.payload();
      nows[i] = request.now().toEpochMilli();
    }
    return changedPositions(
        handle
            .createQuery(completeAllAtOnce)
            .bind("keyIds", array("varchar", keyIds))
            .bind("ownerTokens", array("varchar", ownerTokens))
            .bind("states", array("varchar", states))
            .bind("payloads", array("bytea", payloads))
            .bind("nows", array("int8", nows)));
  }

  @Override
  BitSet extendAllAtOnce(org.jdbi.v3.core.Handle handle, List<ExtendRequest> requests) {
    int size = requests.size();
    String[] keyIds = new String[size];
    String[] ownerTokens = new String[size];
    Long[] leases = new Long[size];
    Long[] nows = new Long[size];
    for (int i = 0; i < size; i++) {
      ExtendRequest request = requests.get(i);
      keyIds[i] = request.keyId();
      ownerTokens[i] = request.ownerToken();
      leases[i] = request.lease().toMillis();
      nows[i] = request.now().toEpochMilli();
    }
    return changedPositions(
        handle
            .createQuery(extendAllAtOnce)
            .bind("keyIds", array("varchar", keyIds))
            .bind("ownerTokens", array("varchar", ownerTokens))
            .bind("leases", array("int8", leases))
            .bind("nows", array("int8", nows)));
  }

  /** An array parameter of the given element type, made by the statement's own connection. */
  private static Argument array(String elementType, Object[] elements) {
    return (position, statement, context) ->
        statement.setArray(
            position, statement.getConnection().createArrayOf(elementType, elements));
  }

  /** Runs an update returning the positions (from 1) of the rows it changed, from 0. */
  private static BitSet changedPositions(Query update) {
    BitSet changed = new BitSet();
    update.mapTo(Long.class).forEach(position -> changed.set((int) (position - 1)));
    return changed;
  }

  @Override
  Map<String, Rows.Row> selectAll(
      org.jdbi.v3.core.Handle handle, List<String> keyIds, Instant now, int maxBatch) {
    var query = handle.createQuery(selectAny).bindArray("keyIds", String.class, keyIds);
    bindNow(query, now);
    return Rows.byKeyId(query);
  }
}
