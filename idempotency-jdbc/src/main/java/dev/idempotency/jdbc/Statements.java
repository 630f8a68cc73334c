package dev.idempotency.jdbc;

import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.ExtendRequest;
import java.sql.Connection;
import java.time.Instant;
import java.util.BitSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Pattern;
import org.jdbi.v3.core.Handle;
import org.jdbi.v3.core.statement.SqlStatement;

/**
 * The SQL of one store, for one dialect: a subclass per database says how that database reads its
 * clock, inserts if absent, claims, reads a batch and purges; everything it shares (the fenced
 * updates, the single-row select) is built here once. Statements are built from checked parts only:
 * a validated table name, fixed fragments and named parameters; values are always bound.
 */
abstract class Statements {

  private static final Pattern IDENTIFIER = Pattern.compile("[A-Za-z_][A-Za-z0-9_]{0,62}");

  /** Every column, in the order of inserts. */
  static final String COLUMNS =
      "key_id, state, owner_token, attempt, fingerprint, payload, created_at, completed_at,"
          + " lease_until, retain_until, debug_key";

  /** The columns a claim reads back. */
  static final String READ =
      "state, owner_token, attempt, fingerprint, payload, created_at, completed_at, lease_until,"
          + " retain_until";

  final String table;
  final boolean databaseTime;
  final String select;
  final String reclaimExpired;
  final String takeOver;
  final String extend;
  final String complete;

  /**
   * The outcome's write with no deferred flush, for a joined transaction: the caller's commit is
   * the application's, and its durability is not the store's to lower.
   */
  final String completeInTransaction;

  final String release;

  /**
   * The take-back of a claim nothing was sent under, first step: deletes a row the claim created
   * (attempt 1), fenced by its owner token, as {@link #release} does.
   */
  final String takeBackFirstAttempt;

  /**
   * The take-back's second step: a row the claim took over (attempt &gt; 1) keeps its attempt, its
   * lease ends now if it had not ended before, and its owner token becomes {@code :endedToken}, a
   * fresh value no caller holds, so that no late write of the claim taken back (a renewal) passes
   * the fence; fenced by the owner token. The next claim takes it over at once.
   */
  final String lapseTakeover;

  /**
   * Gives a row whose lapsed lease a failed batch took over back its owner token, attempt, lease
   * and window, fenced by the batch's owner token ({@link BatchClaimUndo}).
   */
  final String restoreTakenOver;

  final String deleteSettled;

  /** Reads nothing from the table, and fails if it does not exist: the start-up check. */
  final String probeTable;

  private final PlainStatement insertClaim;
  private final PlainStatement selectOne;
  private final Map<Integer, String> insertAllBySize = new ConcurrentHashMap<>();

  Statements(String table, boolean databaseTime, boolean synchronousOutcomes) {
    this.table = table;
    this.databaseTime = databaseTime;
    String now = now();
    String lease = bigint("leaseMillis");
    select = "SELECT " + READ + ", " + now + " AS db_now FROM " + table + " WHERE key_id = :keyId";
    reclaimExpired =
        "UPDATE "
            + table
            + " SET state = 'IN_PROGRESS', owner_token = :ownerToken, attempt = 1,"
            + " fingerprint = :fingerprint, payload = NULL, created_at = "
            + now
            + ", completed_at = NULL, lease_until = "
            + now
            + " + "
            + lease
            + ", retain_until = "
            + now
            + " + "
            + bigint("retentionMillis")
            + ", debug_key = :debugKey"
            + " WHERE key_id = :keyId AND owner_token = :seenToken AND state = :seenState"
            + " AND retain_until <= "
            + now;
    takeOver =
        "UPDATE "
            + table
            + " SET owner_token = :ownerToken, attempt = attempt + 1, lease_until = "
            + now
            + " + "
            + lease
            + ", retain_until = "
            + lastingAtLeast(now + " + " + lease)
            + " WHERE key_id = :keyId AND owner_token = :seenToken AND state = 'IN_PROGRESS'"
            + " AND lease_until <= "
            + now
            + " AND retain_until > "
            + now
            + " AND fingerprint = :fingerprint";
    extend =
        "UPDATE "
            + table
            + " SET lease_until = "
            + neverBack(now + " + " + lease)
            + ", retain_until = "
            + lastingAtLeast(now + " + " + lease)
            // fenced by the owner token alone, not by the renewer's clock: an owner whose clock
            // ran past the window still holds the row (nobody claimed it since) and keeps it; a
            // row already leased further (a newer renewal landed first) still counts as renewed
            + " WHERE key_id = :keyId AND owner_token = :ownerToken AND state = 'IN_PROGRESS'";
    complete =
        "UPDATE "
            + table
            + " SET state = :state, payload = :payload, completed_at = "
            + now
            + " WHERE key_id = :keyId AND owner_token = :ownerToken AND state = 'IN_PROGRESS'"
            + (synchronousOutcomes ? "" : deferredFlush());
    completeInTransaction =
        "UPDATE "
            + table
            + " SET state = :state, payload = :payload, completed_at = "
            + now
            + " WHERE key_id = :keyId AND owner_token = :ownerToken AND state = 'IN_PROGRESS'";
    release =
        "DELETE FROM "
            + table
            + " WHERE key_id = :keyId AND owner_token = :ownerToken AND state = 'IN_PROGRESS'";
    takeBackFirstAttempt = release + " AND attempt = 1";
    lapseTakeover =
        "UPDATE "
            + table
            + " SET owner_token = :endedToken, lease_until = LEAST(lease_until, "
            + now
            + ") WHERE key_id = :keyId AND owner_token = :ownerToken AND state = 'IN_PROGRESS'"
            + " AND attempt > 1";
    restoreTakenOver =
        "UPDATE "
            + table
            + " SET owner_token = :seenToken, attempt = :seenAttempt, lease_until = "
            + bigint("seenLeaseUntil")
            + ", retain_until = "
            + bigint("seenRetainUntil")
            + " WHERE key_id = :keyId AND owner_token = :ownerToken AND state = 'IN_PROGRESS'";
    deleteSettled =
        "DELETE FROM "
            + table
            + " WHERE key_id = :keyId AND state <> 'IN_PROGRESS' AND retain_until > "
            + now;
    probeTable = "SELECT key_id FROM " + table + " WHERE 1 = 0";
    // a dialect's insertIfAbsent reads only the table name, set above
    insertClaim = new PlainStatement(insertIfAbsent(claimValues()));
    selectOne = new PlainStatement(select);
  }

  // ---- joined transactions: the session's lock wait, read, set and restored

  /** Reads the session's lock wait as one string column ({@link #setLockWait} takes it back). */
  abstract String readLockWait();

  /** Sets the session's (or the transaction's) lock wait to the parameter {@code :lockWait}. */
  abstract String setLockWait();

  /** The value {@link #setLockWait} binds for a wait: the dialect's unit, never below its least. */
  abstract Object lockWaitValue(java.time.Duration wait);

  /** Turns a value {@link #readLockWait} read back into what {@link #setLockWait} binds. */
  Object restoredLockWait(String read) {
    return read;
  }

  /** Whether a failure is this database's "lock wait timed out". */
  abstract boolean isLockWaitTimeout(java.sql.SQLException failure);

  /** Whether a failure is this database's "statement cancelled" (the watchdog's cancel). */
  boolean isCancelled(java.sql.SQLException failure) {
    return "57014".equals(failure.getSQLState());
  }

  /**
   * Reads the id of the open transaction as one string column (null while it has written nothing),
   * so that a joined call can tell whether its sender committed the transaction; or {@code null}
   * where the dialect has none for every user, and a savepoint tells instead.
   */
  String transactionId() {
    return null;
  }

  /**
   * The single-row select, as a read of the latest committed row inside a transaction: where a
   * plain select reads the transaction's snapshot (MySQL's repeatable read), a locking read.
   */
  String selectLatest() {
    return select;
  }

  /** Inserts the claim's row if absent: whether it did (a unique violation counts as not). */
  final boolean insertClaim(
      Connection connection, StatementWatchdog watchdog, ClaimRequest request) {
    return SqlExecutor.insertedUnlessConflict(
        () -> insertClaim.update(connection, watchdog, claimParameters(request)));
  }

  // ---- what each dialect says

  /** The database's clock in milliseconds since the epoch, UTC, as an SQL expression. */
  abstract String databaseNow();

  /** A named parameter used as a 64-bit integer. */
  String bigint(String parameter) {
    return "CAST(:" + parameter + " AS BIGINT)";
  }

  /** Inserts one row unless its key exists; one inserted row means the claim is ours. */
  abstract String insertIfAbsent(String values);

  /** Inserts many rows in one statement, skipping keys that exist. */
  abstract String insertAllIfAbsent(String rows);

  /**
   * A condition that lets the outcome's commit return before the database flushes it, or empty
   * where the dialect cannot (then every commit waits for its flush, as the claim always does). It
   * must read no field of the subclass: the constructor calls it.
   */
  String deferredFlush() {
    return "";
  }

  /** Deletes at most {@code :limit} rows past their window. */
  abstract String purge();

  /** Deletes every row past its window: what a dialect bounds by {@code :limit}. */
  final String deleteExpired() {
    return "DELETE FROM " + table + " WHERE retain_until <= " + now();
  }

  /**
   * The first step of a claim: inserts the row if the key is absent and reports it, else reads the
   * row. The default takes two statements, an insert and a select.
   *
   * @return inserted, or the row (empty if it vanished meanwhile)
   */
  Rows.InsertOrRow insertOrRead(
      Connection connection, StatementWatchdog watchdog, ClaimRequest request) {
    if (SqlExecutor.insertedUnlessConflict(
        () -> insertClaim.update(connection, watchdog, claimParameters(request)))) {
      return Rows.InsertOrRow.INSERTED;
    }
    return new Rows.InsertOrRow(
        false, selectRow(connection, watchdog, request.keyId(), request.now()));
  }

  /** Whether a batch's rows are inserted in one statement; otherwise key by key. */
  boolean insertsBatches() {
    return true;
  }

  /**
   * Whether a batch's insert-if-absent reports the rows it inserted ({@link
   * #insertAllReturningOwners}), so that a batch claim inserts first and reads only the keys it did
   * not insert; otherwise it reads first and inserts the absent keys.
   */
  boolean insertsBatchesFirst() {
    return false;
  }

  /**
   * Inserts-if-absent the rows of a batch that shares one time, lease and window, in one statement,
   * and reports the rows it inserted. Only where {@link #insertsBatchesFirst()}.
   *
   * @return the owner token of each row inserted, by key id
   */
  Map<String, String> insertAllReturningOwners(Handle handle, List<ClaimRequest> requests) {
    throw new UnsupportedOperationException("this dialect reads a batch before inserting it");
  }

  /**
   * Whether {@link #completeAllAtOnce} and {@link #extendAllAtOnce} write a batch of distinct keys
   * in one statement; otherwise the batch is a JDBC batch of the single-row statements.
   */
  boolean updatesBatchesAtOnce() {
    return false;
  }

  /**
   * Writes the outcomes of a batch of distinct keys in one statement, each fenced by its owner
   * token as {@link #complete} is. Only where {@link #updatesBatchesAtOnce()}.
   *
   * @return the positions in {@code requests} of the rows it changed
   */
  BitSet completeAllAtOnce(Handle handle, List<CompleteRequest> requests) {
    throw new UnsupportedOperationException("this dialect completes a batch row by row");
  }

  /**
   * Renews the leases of a batch of distinct keys in one statement, each fenced by its owner token
   * as {@link #extend} is. Only where {@link #updatesBatchesAtOnce()}.
   *
   * @return the positions in {@code requests} of the rows it changed
   */
  BitSet extendAllAtOnce(Handle handle, List<ExtendRequest> requests) {
    throw new UnsupportedOperationException("this dialect extends a batch row by row");
  }

  /**
   * Reads the rows of a batch's keys in one statement. The default reads an {@code IN} list padded
   * to a power-of-two size, so that a store prepares few statement shapes.
   */
  Map<String, Rows.Row> selectAll(Handle handle, List<String> keyIds, Instant now, int maxBatch) {
    int size = paddedSize(keyIds.size(), maxBatch);
    StringBuilder in = new StringBuilder();
    for (int i = 0; i < size; i++) {
      in.append(i > 0 ? ", " : "").append(":keyId_").append(i);
    }
    var query =
        handle.createQuery(
            "SELECT "
                + READ
                + ", "
                + now()
                + " AS db_now, key_id FROM "
                + table
                + " WHERE key_id IN ("
                + in
                + ")");
    for (int i = 0; i < size; i++) {
      query.bind("keyId_" + i, keyIds.get(Math.min(i, keyIds.size() - 1)));
    }
    bindNow(query, now);
    return Rows.byKeyId(query);
  }

  // ---- shared building blocks

  /**
   * The row's end, moved to {@code leaseEnd} if that is later: a lease never outlives its row, so a
   * live owner's row never ends under it, even past the window. Each assignment of an update reads
   * only its own column, since MySQL evaluates assignments left to right.
   */
  static String lastingAtLeast(String leaseEnd) {
    return "GREATEST(retain_until, " + leaseEnd + ")";
  }

  /**
   * A renewal's new lease end, never before the stored one: a renewal the client gave up on that
   * reaches the database after a newer one (its end computed from an earlier time) leaves the
   * newer, later lease. {@code GREATEST} is in every supported dialect (PostgreSQL, MariaDB and
   * MySQL, H2).
   */
  static String neverBack(String leaseEnd) {
    return "GREATEST(lease_until, " + leaseEnd + ")";
  }

  /** Now, in SQL: the database's clock, or the request's time bound as {@code :now}. */
  final String now() {
    return databaseTime ? databaseNow() : bigint("now");
  }

  /** The values of one new in-progress row, with the claim's named parameters. */
  final String claimValues() {
    return rowValues("keyId", "ownerToken", "fingerprint", "debugKey");
  }

  /** The values of a new in-progress row, with parameters of the given names. */
  final String rowValues(String keyId, String ownerToken, String fingerprint, String debugKey) {
    String now = now();
    return ":"
        + keyId
        + ", 'IN_PROGRESS', :"
        + ownerToken
        + ", 1, :"
        + fingerprint
        + ", NULL, "
        + now
        + ", NULL, "
        + now
        + " + "
        + bigint("leaseMillis")
        + ", "
        + now
        + " + "
        + bigint("retentionMillis")
        + ", :"
        + debugKey;
  }

  /** One insert-if-absent of {@code rows} rows; row {@code i} binds {@code keyId_i} and so on. */
  final String insertAll(int rows) {
    return insertAllBySize.computeIfAbsent(
        rows,
        size -> {
          StringBuilder values = new StringBuilder();
          for (int i = 0; i < size; i++) {
            values
                .append(i > 0 ? ", (" : "(")
                .append(
                    rowValues("keyId_" + i, "ownerToken_" + i, "fingerprint_" + i, "debugKey_" + i))
                .append(')');
          }
          return insertAllIfAbsent(values.toString());
        });
  }

  /** The row of a key, as the database's snapshot shows it, or empty. */
  final Optional<Rows.Row> selectRow(
      Connection connection, StatementWatchdog watchdog, String keyId, Instant now) {
    return selectOne.query(
        connection,
        watchdog,
        name ->
            switch (name) {
              case "keyId" -> keyId;
              case "now" -> now.toEpochMilli();
              default -> throw new IllegalArgumentException("no parameter " + name);
            },
        rows -> rows.next() ? Optional.of(Rows.Row.read(rows)) : Optional.<Rows.Row>empty());
  }

  /** A claim's parameters: key, token, fingerprint, lease, window, raw key, time. */
  static PlainStatement.Values claimParameters(ClaimRequest request) {
    return name ->
        switch (name) {
          case "keyId" -> request.keyId();
          case "ownerToken" -> request.ownerToken();
          case "fingerprint" -> request.fingerprint();
          case "leaseMillis" -> request.lease().toMillis();
          case "retentionMillis" -> request.retention().toMillis();
          case "debugKey" -> request.debugKey();
          case "now" -> request.now().toEpochMilli();
          default -> throw new IllegalArgumentException("a claim has no parameter " + name);
        };
  }

  /** Binds {@code :now} unless the database's clock is used. */
  final void bindNow(SqlStatement<?> statement, Instant now) {
    if (!databaseTime) {
      statement.bind("now", now.toEpochMilli());
    }
  }

  /** The DDL for this store's table: the dialect's resource with its placeholders filled. */
  static String schema(String script, String tableName) {
    return script
        .replace("${table}", tableName)
        .replace("${name}", tableName.substring(tableName.lastIndexOf('.') + 1));
  }

  /**
   * The statement size for a batch of {@code count}: the next power of two, at most {@code max}.
   */
  static int paddedSize(int count, int max) {
    return count <= 1 ? 1 : Math.min(max, Integer.highestOneBit(count - 1) << 1);
  }

  /**
   * Checks a table name: a plain identifier, optionally schema-qualified, so that configuration can
   * never inject SQL.
   */
  static String requireTableName(String tableName) {
    if (tableName == null) {
      throw new NullPointerException("tableName must not be null");
    }
    String[] parts = tableName.split("\\.", -1);
    boolean valid = parts.length <= 2;
    for (String part : parts) {
      valid &= IDENTIFIER.matcher(part).matches();
    }
    if (!valid) {
      throw new IllegalArgumentException(
          "tableName must be a plain identifier ([A-Za-z_][A-Za-z0-9_]*, at most 63 characters),"
              + " optionally schema-qualified, was '"
              + tableName
              + "'");
    }
    return tableName;
  }
}
