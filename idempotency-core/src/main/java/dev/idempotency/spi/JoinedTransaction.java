package dev.idempotency.spi;

import java.time.Duration;
import java.util.Optional;

/**
 * A store's records inside one open transaction of the application's, for {@link
 * dev.idempotency.IdempotencyGuard#executeInTransaction}: the claim, the sender's own writes
 * through that transaction and the outcome then commit or roll back as one. A JDBC store gives one
 * for a {@code java.sql.Connection} with {@code JdbcKeyStore.joining(connection)}.
 *
 * <p>There is no lease in this mode: the claim is an uncommitted insert of the key's record, which
 * no other transaction sees, and the database's lock on it stands in for the lease. A concurrent
 * claim of the same key waits on that lock until the first transaction ends, then finds the
 * committed record or, after a rollback, claims the key itself.
 *
 * <p>An instance belongs to the transaction, and so to the thread that runs it: not thread-safe.
 * Failures of the database are thrown as {@link dev.idempotency.KeyStoreException}; after one, the
 * caller's transaction must be rolled back.
 */
public interface JoinedTransaction {

  /**
   * The store whose records this transaction writes: a guard joins only a transaction of its own
   * store, so that {@code find}, {@code forget} and the usual mode read the same records.
   *
   * @return the store
   */
  KeyStore store();

  /**
   * Claims a key inside the transaction, as {@link KeyStore#claim} does outside one: inserts the
   * record if the key is absent (uncommitted, so visible to this transaction only), or reads the
   * committed one, or takes over one past its window or with an expired lease, as the request
   * allows. While another transaction holds an uncommitted record of the key, waits for it to end,
   * at most {@code lockWait}.
   *
   * @param request the claim
   * @param lockWait how long to wait for a transaction that holds the key; positive
   * @return the claim's result, or empty if another transaction still held the key when the wait
   *     ran out (nothing was written)
   * @throws dev.idempotency.KeyStoreException if the database failed, or chose this transaction as
   *     a deadlock or serialization victim (nothing was sent; the transaction must be rolled back)
   */
  Optional<ClaimResult> claim(ClaimRequest request, Duration lockWait);

  /**
   * Writes the outcome of a claim made in this transaction, fenced by its owner token.
   *
   * @param request the outcome
   * @return {@code true} if the record was written; {@code false} if this transaction holds no
   *     record of the key with that token
   * @throws dev.idempotency.KeyStoreException if the database failed
   */
  boolean complete(CompleteRequest request);

  /**
   * Deletes the record of a claim made in this transaction, fenced by its owner token: after a
   * failed send, so that the key is not left claimed if the transaction commits anyway.
   *
   * @param keyId the key id
   * @param ownerToken the claim's owner token
   * @return {@code true} if the record was deleted
   * @throws dev.idempotency.KeyStoreException if the database failed
   */
  boolean release(String keyId, String ownerToken);
}
