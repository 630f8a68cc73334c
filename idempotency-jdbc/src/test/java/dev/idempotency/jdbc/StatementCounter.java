package dev.idempotency.jdbc;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.Statement;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;

/**
 * A DataSource wrapper that counts the statements executed on its connections (a JDBC batch counts
 * once), whatever API issued them: Jdbi's statements and the store's plain ones alike.
 */
final class StatementCounter extends ForwardingDataSource {

  private static final Set<String> EXECUTIONS =
      Set.of("execute", "executeQuery", "executeUpdate", "executeLargeUpdate", "executeBatch");

  private final AtomicInteger executed;

  StatementCounter(DataSource delegate, AtomicInteger executed) {
    super(delegate);
    this.executed = executed;
  }

  @Override
  Connection wrap(Connection connection) {
    return (Connection) proxy(Connection.class, connection);
  }

  private static Class<?> interfaceOf(Statement statement) {
    if (statement instanceof java.sql.CallableStatement) {
      return java.sql.CallableStatement.class;
    }
    if (statement instanceof java.sql.PreparedStatement) {
      return java.sql.PreparedStatement.class;
    }
    return Statement.class;
  }

  /** A proxy of {@code target} that counts executions and wraps the statements it hands out. */
  private Object proxy(Class<?> type, Object target) {
    return Proxy.newProxyInstance(
        type.getClassLoader(),
        new Class<?>[] {type},
        (proxy, method, args) -> {
          if (target instanceof Statement && EXECUTIONS.contains(method.getName())) {
            executed.incrementAndGet();
          }
          Object result;
          try {
            result = method.invoke(target, args);
          } catch (InvocationTargetException e) {
            throw e.getCause();
          }
          return target instanceof Connection && result instanceof Statement statement
              ? proxy(interfaceOf(statement), statement)
              : result;
        });
  }
}
