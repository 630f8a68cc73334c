package dev.idempotency.jdbc;

import dev.idempotency.UnreadableRecordException;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spi.StoredRecord;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Instant;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;
import org.jdbi.v3.core.statement.Query;

/** Row mapping: the columns a claim reads back, as a record with its owner token and the time. */
final class Rows {

  private Rows() {}

  /**
   * One row as read: the record, the owner token (which never leaves the store), the lease and
   * window ends, and the time the statement ran at (the database's, or the bound request time).
   */
  record Row(StoredRecord record, String ownerToken, long leaseUntil, long retainUntil, long now) {

    static Row read(ResultSet rs) throws SQLException {
      long completedAt = rs.getLong("completed_at");
      Instant completed = rs.wasNull() ? null : Instant.ofEpochMilli(completedAt);
      long leaseUntil = rs.getLong("lease_until");
      long retainUntil = rs.getLong("retain_until");
      StoredRecord record =
          new StoredRecord(
              state(rs.getString("state")),
              rs.getInt("attempt"),
              rs.getString("fingerprint"),
              rs.getBytes("payload"),
              Instant.ofEpochMilli(rs.getLong("created_at")),
              completed,
              Instant.ofEpochMilli(leaseUntil),
              Instant.ofEpochMilli(retainUntil));
      return new Row(
          record, rs.getString("owner_token"), leaseUntil, retainUntil, rs.getLong("db_now"));
    }

    /** A row's state; another value is a row this store cannot read, not a store failure. */
    private static RecordState state(String stored) {
      try {
        return RecordState.valueOf(stored);
      } catch (IllegalArgumentException | NullPointerException notARecord) {
        throw new UnreadableRecordException(
            "JDBC store found a row whose state is not IN_PROGRESS, COMPLETED or FAILED", null);
      }
    }

    boolean ownedBy(String token) {
      return ownerToken.equals(token);
    }

    boolean pastWindow() {
      return retainUntil <= now;
    }

    boolean leaseExpired() {
      return record.state() == RecordState.IN_PROGRESS && leaseUntil <= now;
    }
  }

  /**
   * What the first step of a claim saw: the row inserted, or else the row (empty if it vanished
   * meanwhile, or is not in the statement's snapshot).
   */
  record InsertOrRow(boolean inserted, Optional<Row> row) {

    static final InsertOrRow INSERTED = new InsertOrRow(true, Optional.empty());

    /**
     * Reads PostgreSQL's one-statement claim: {@code inserted}, else the row's columns or nulls.
     */
    static InsertOrRow read(ResultSet rs) throws SQLException {
      if (rs.getInt("inserted") == 1) {
        return INSERTED;
      }
      return new InsertOrRow(
          false, rs.getString("state") == null ? Optional.empty() : Optional.of(Row.read(rs)));
    }
  }

  /** Runs a query that selects {@code key_id} besides a row's columns, into a map by key id. */
  static Map<String, Row> byKeyId(Query query) {
    Map<String, Row> rows = new HashMap<>();
    query
        .map((rs, ctx) -> Map.entry(rs.getString("key_id"), Row.read(rs)))
        .forEach(e -> rows.put(e.getKey(), e.getValue()));
    return rows;
  }
}
