package dev.idempotency.spring;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.Outcome;
import dev.idempotency.ResultCodec;
import dev.idempotency.Sender;
import dev.idempotency.jdbc.JdbcKeyStore;
import dev.idempotency.spi.KeyStore;
import java.lang.reflect.Method;
import java.sql.Connection;
import java.util.List;
import javax.sql.DataSource;
import org.springframework.jdbc.datasource.ConnectionHolder;
import org.springframework.jdbc.datasource.DataSourceUtils;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * The calls of {@link Idempotent#joinTransaction()} methods: the guarded call runs on the
 * connection of the Spring-managed transaction that is active on the calling thread, so the key's
 * record, the method's writes and the outcome commit or roll back together. Loaded only for such a
 * method, so that the starter runs without spring-jdbc otherwise. Stateless.
 */
final class JoinedCalls {

  /** {@code ConnectionHolder.isTransactionActive()}, or null where it cannot be called. */
  private static final Method TRANSACTION_ACTIVE = transactionActiveMethod();

  private JoinedCalls() {}

  /**
   * Refuses at startup a joining method whose guard's store cannot join a Spring transaction.
   *
   * @throws IllegalStateException naming the method and the store
   */
  static void requireJoinableStore(IdempotentMethod method, KeyStore store) {
    dataSourceOf(method, store);
  }

  /**
   * Runs the guarded call inside the caller's transaction.
   *
   * @throws IllegalStateException if no transaction is active, or it does not hold the store's
   *     {@code DataSource}
   */
  static <T> Outcome<T> execute(
      IdempotentMethod method,
      IdempotencyGuard guard,
      IdempotencyRequest request,
      ResultCodec<T> codec,
      Sender<T> sender) {
    JdbcKeyStore store = (JdbcKeyStore) guard.store();
    DataSource dataSource = dataSourceOf(method, store);
    if (!TransactionSynchronizationManager.isActualTransactionActive()) {
      throw new IllegalStateException(
          method.where()
              + " has joinTransaction = true, but no transaction is active on this thread: call it"
              + " from inside a Spring-managed transaction (a @Transactional method or a"
              + " TransactionTemplate) on the store's DataSource; nothing ran");
    }
    if (!(TransactionSynchronizationManager.getResource(dataSource)
            instanceof ConnectionHolder holder)
        || !boundByTransaction(holder)) {
      throw new IllegalStateException(
          method.where()
              + " has joinTransaction = true, but the active transaction does not hold the"
              + " idempotency store's DataSource ("
              + dataSource
              + "): it holds "
              + heldResources()
              + " (a connection of the store's that a JdbcTemplate read meanwhile is not its"
              + " transaction); run it under a transaction manager of the store's DataSource"
              + " (DataSourceTransactionManager, JdbcTransactionManager, or JpaTransactionManager"
              + " on it); nothing ran");
    }
    Connection connection = DataSourceUtils.getConnection(dataSource);
    try {
      return guard.executeInTransaction(store.joining(connection), request, codec, sender);
    } finally {
      DataSourceUtils.releaseConnection(connection, dataSource);
    }
  }

  /**
   * Whether a bound holder is a transaction's on the store's {@code DataSource}, not one that
   * {@code DataSourceUtils} bound for a plain read (a {@code JdbcTemplate} call while another
   * transaction manager's transaction synchronizes the thread): that one is marked synchronized
   * with the transaction but never committed, so a call joined to it would return and leave
   * nothing. A {@code DataSourceTransactionManager} (or {@code JdbcTransactionManager}) marks its
   * holder transaction-active; a {@code JpaTransactionManager} binds one it does not mark
   * synchronized. Spring exposes the mark only to subclasses, hence the reflection; where it cannot
   * be read, every bound holder is taken as before.
   */
  static boolean boundByTransaction(ConnectionHolder holder) {
    if (!holder.isSynchronizedWithTransaction() || TRANSACTION_ACTIVE == null) {
      return true;
    }
    try {
      return (boolean) TRANSACTION_ACTIVE.invoke(holder);
    } catch (ReflectiveOperationException | RuntimeException e) {
      return true;
    }
  }

  private static Method transactionActiveMethod() {
    try {
      Method method = ConnectionHolder.class.getDeclaredMethod("isTransactionActive");
      method.setAccessible(true);
      return method;
    } catch (ReflectiveOperationException | RuntimeException e) {
      return null;
    }
  }

  private static DataSource dataSourceOf(IdempotentMethod method, KeyStore store) {
    if (!(store instanceof JdbcKeyStore jdbc)) {
      throw new IdempotencyConfigurationException(
          method.where()
              + " has joinTransaction = true, but the idempotency store is "
              + store.kind()
              + ", not the JDBC store: only a JdbcKeyStore on the application's DataSource can"
              + " join its transaction.",
          "Use the JDBC store or remove joinTransaction.");
    }
    return jdbc.dataSource()
        .orElseThrow(
            () ->
                new IdempotencyConfigurationException(
                    method.where()
                        + " has joinTransaction = true, but the JdbcKeyStore was not built on a"
                        + " DataSource, so no Spring transaction can hold it.",
                    "Build it with JdbcKeyStore.builder(dataSource)."));
  }

  /** What the active transaction holds (its DataSources), for the message of a wrong one. */
  private static String heldResources() {
    List<String> held =
        TransactionSynchronizationManager.getResourceMap().keySet().stream()
            .map(String::valueOf)
            .sorted()
            .toList();
    return held.isEmpty() ? "no DataSource" : String.join(", ", held);
  }
}
