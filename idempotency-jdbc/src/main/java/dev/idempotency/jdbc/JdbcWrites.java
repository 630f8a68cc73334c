package dev.idempotency.jdbc;

import dev.idempotency.UnreadableRecordException;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.RecordState;
import java.sql.Connection;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.BitSet;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.function.BiPredicate;
import java.util.function.Function;
import org.jdbi.v3.core.Handle;
import org.jdbi.v3.core.statement.PreparedBatch;

/**
 * The owner's fenced writes: complete, release, take-back and extend, each conditional on the owner
 * token (a {@link PlainStatement}: an outcome follows every first send), and the batches of
 * complete and extend as one statement over arrays on PostgreSQL, elsewhere as one JDBC batch (one
 * round trip with the MariaDB driver, one statement per row on the server).
 */
final class JdbcWrites {

  private final Statements sql;
  private final StatementWatchdog watchdog;
  private final PlainStatement complete;
  private final PlainStatement release;
  private final PlainStatement takeBackFirstAttempt;
  private final PlainStatement lapseTakeover;
  private final PlainStatement extend;
  private final PlainStatement deleteSettled;

  JdbcWrites(Statements sql, StatementWatchdog watchdog) {
    this.sql = sql;
    this.watchdog = watchdog;
    this.complete = new PlainStatement(sql.complete);
    this.release = new PlainStatement(sql.release);
    this.takeBackFirstAttempt = new PlainStatement(sql.takeBackFirstAttempt);
    this.lapseTakeover = new PlainStatement(sql.lapseTakeover);
    this.extend = new PlainStatement(sql.extend);
    this.deleteSettled = new PlainStatement(sql.deleteSettled);
  }

  /**
   * Writes the outcome, fenced; if no row changed, reads the row back: its owner repeating the
   * outcome it already wrote (a retry after a lost reply) counts as written.
   */
  boolean complete(Connection connection, CompleteRequest request) {
    return complete.update(connection, watchdog, values(request)) == 1
        || holdsOutcome(connection, request);
  }

  boolean release(Connection connection, String keyId, String ownerToken) {
    return release.update(
            connection,
            watchdog,
            name ->
                switch (name) {
                  case "keyId" -> keyId;
                  case "ownerToken" -> ownerToken;
                  default -> throw new IllegalArgumentException("no parameter " + name);
                })
        == 1;
  }

  /**
   * Takes back a claim nothing was sent under, fenced by its owner token, in two statements that
   * cannot both match (the attempt of a row never changes under one owner token):
   *
   * <ol>
   *   <li>a row the claim created (attempt 1) is deleted;
   *   <li>else a row it took over (attempt &gt; 1) keeps its attempt, its lease ending now, and
   *       gets a fresh owner token no caller holds, so that no late renewal, completion or release
   *       of the claim taken back can change it again.
   * </ol>
   */
  boolean takeBack(Connection connection, String keyId, String ownerToken, Instant now) {
    String endedToken = endedOwnerToken();
    PlainStatement.Values values =
        name ->
            switch (name) {
              case "keyId" -> keyId;
              case "ownerToken" -> ownerToken;
              case "now" -> now.toEpochMilli();
              case "endedToken" -> endedToken;
              default -> throw new IllegalArgumentException("no parameter " + name);
            };
    return takeBackFirstAttempt.update(connection, watchdog, values) == 1
        || lapseTakeover.update(connection, watchdog, values) == 1;
  }

  /** A random owner token (22 characters, as a claim's), held by no caller. */
  private static String endedOwnerToken() {
    byte[] bytes = new byte[16];
    java.util.concurrent.ThreadLocalRandom.current().nextBytes(bytes);
    return java.util.Base64.getUrlEncoder().withoutPadding().encodeToString(bytes);
  }

  /** Deletes a completed or failed row inside its window; never one in progress. */
  boolean deleteSettled(Connection connection, String keyId, java.time.Instant now) {
    return deleteSettled.update(
            connection,
            watchdog,
            name ->
                switch (name) {
                  case "keyId" -> keyId;
                  case "now" -> now.toEpochMilli();
                  default -> throw new IllegalArgumentException("no parameter " + name);
                })
        == 1;
  }

  /**
   * Renews a lease, fenced; if no row changed, reads the row back: a renewal that matched its
   * owner's row but changed nothing (the stored lease already ended later, {@link
   * Statements#neverBack}) counts as renewed where the driver reports changed rows rather than
   * matched ones (MariaDB's and MySQL's {@code useAffectedRows=true}).
   */
  boolean extend(Connection connection, ExtendRequest request) {
    return extend.update(connection, watchdog, values(request)) == 1
        || stillRenewed(connection, request);
  }

  /**
   * Writes the outcomes, each fenced: in one statement where the dialect can and the keys are
   * distinct, else as a JDBC batch; then reads back each row not changed, as {@link #complete}
   * does. A row that cannot be read back (not one of the store's records) is that key's outcome not
   * written, not a failure of the batch: the others' results stand.
   */
  List<Boolean> completeAll(Handle handle, List<CompleteRequest> requests) {
    if (!sql.updatesBatchesAtOnce() || !distinctKeys(requests, CompleteRequest::keyId)) {
      return batch(
          handle,
          complete,
          requests,
          JdbcWrites::values,
          (h, request) -> holdsReadableOutcome(h.getConnection(), request));
    }
    List<Boolean> written = changed(sql.completeAllAtOnce(handle, requests), requests.size());
    for (int i = 0; i < written.size(); i++) {
      if (!written.get(i)) {
        written.set(i, holdsReadableOutcome(handle.getConnection(), requests.get(i)));
      }
    }
    return written;
  }

  /**
   * Renews the leases, each fenced: in one statement where the dialect can and the keys are
   * distinct (a key twice would be renewed once, and report one renewal), else as a JDBC batch.
   */
  List<Boolean> extendAll(Handle handle, List<ExtendRequest> requests) {
    if (sql.updatesBatchesAtOnce() && distinctKeys(requests, ExtendRequest::keyId)) {
      return changed(sql.extendAllAtOnce(handle, requests), requests.size());
    }
    return batch(
        handle,
        extend,
        requests,
        JdbcWrites::values,
        (h, request) -> stillRenewed(h.getConnection(), request));
  }

  private static <R> boolean distinctKeys(List<R> requests, Function<R, String> keyId) {
    Set<String> seen = new HashSet<>();
    for (R request : requests) {
      if (!seen.add(keyId.apply(request))) {
        return false;
      }
    }
    return true;
  }

  private static List<Boolean> changed(BitSet changed, int size) {
    List<Boolean> results = new ArrayList<>(size);
    for (int i = 0; i < size; i++) {
      results.add(changed.get(i));
    }
    return results;
  }

  static PlainStatement.Values values(CompleteRequest request) {
    return name ->
        switch (name) {
          case "keyId" -> request.keyId();
          case "ownerToken" -> request.ownerToken();
          case "state" -> request.state().name();
          case "payload" -> request.payload();
          case "now" -> request.now().toEpochMilli();
          default -> throw new IllegalArgumentException("an outcome has no parameter " + name);
        };
  }

  private static PlainStatement.Values values(ExtendRequest request) {
    return name ->
        switch (name) {
          case "keyId" -> request.keyId();
          case "ownerToken" -> request.ownerToken();
          case "leaseMillis" -> request.lease().toMillis();
          case "now" -> request.now().toEpochMilli();
          default -> throw new IllegalArgumentException("a renewal has no parameter " + name);
        };
  }

  /** Read back: whether the row holds the outcome this request writes, by its owner. */
  private boolean holdsOutcome(Connection connection, CompleteRequest request) {
    return sql.selectRow(connection, watchdog, request.keyId(), request.now())
        .filter(row -> row.ownedBy(request.ownerToken()))
        .filter(row -> row.record().state() == request.state())
        .filter(row -> Arrays.equals(row.record().payload(), request.payload()))
        .isPresent();
  }

  /** {@link #holdsOutcome}, for one key of a batch: an unreadable row does not hold it. */
  private boolean holdsReadableOutcome(Connection connection, CompleteRequest request) {
    try {
      return holdsOutcome(connection, request);
    } catch (UnreadableRecordException notARecord) {
      return false;
    }
  }

  /**
   * Read back after a renewal that reported no row changed (or no count): whether the row is still
   * this owner's claim, in progress, leased at least as far as the renewal asked (on database time,
   * still leased now). A row that is not one of the store's records is not renewed.
   */
  private boolean stillRenewed(Connection connection, ExtendRequest request) {
    try {
      return sql.selectRow(connection, watchdog, request.keyId(), request.now())
          .filter(row -> row.ownedBy(request.ownerToken()))
          .filter(row -> row.record().state() == RecordState.IN_PROGRESS)
          .filter(
              row ->
                  row.leaseUntil()
                      >= (sql.databaseTime
                          ? row.now() + 1
                          : request.now().toEpochMilli() + request.lease().toMillis()))
          .isPresent();
    } catch (UnreadableRecordException notARecord) {
      return false;
    }
  }

  /**
   * Runs one fenced statement per request as a JDBC batch; each row not reported changed (none
   * changed, or "done, count unknown" from drivers that do not count batched updates) is read back
   * once and checked with {@code written}.
   */
  private static <R> List<Boolean> batch(
      Handle handle,
      PlainStatement statement,
      List<R> requests,
      Function<R, PlainStatement.Values> values,
      BiPredicate<Handle, R> written) {
    PreparedBatch batch = handle.prepareBatch(statement.namedSql());
    for (R request : requests) {
      PlainStatement.Values row = values.apply(request);
      for (String name : statement.parameterNames()) {
        batch.bind(name, row.value(name));
      }
      batch.add();
    }
    int[] counts = batch.execute();
    List<Boolean> results = new ArrayList<>(counts.length);
    for (int i = 0; i < counts.length; i++) {
      // a row not reported changed (0, or SUCCESS_NO_INFO from a driver that does not count) is
      // read back once: the statement may have matched it without changing it
      results.add(counts[i] == 1 || written.test(handle, requests.get(i)));
    }
    return results;
  }
}
