package dev.idempotency.jdbc;

import java.io.PrintWriter;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.logging.Logger;
import javax.sql.DataSource;

/**
 * A DataSource wrapper that counts the statements executed on its connections (a JDBC batch counts
 * once), whatever API issued them: Jdbi's statements and the store's plain ones alike.
 */
final class StatementCounter implements DataSource {

  private static final Set<String> EXECUTIONS =
      Set.of("execute", "executeQuery", "executeUpdate", "executeLargeUpdate", "executeBatch");

  private final DataSource delegate;
  private final AtomicInteger executed;

  StatementCounter(DataSource delegate, AtomicInteger executed) {
    this.delegate = delegate;
    this.executed = executed;
  }

  @Override
  public Connection getConnection() throws SQLException {
    return counting(delegate.getConnection());
  }

  @Override
  public Connection getConnection(String user, String password) throws SQLException {
    return counting(delegate.getConnection(user, password));
  }

  private Connection counting(Connection connection) {
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

  @Override
  public PrintWriter getLogWriter() throws SQLException {
    return delegate.getLogWriter();
  }

  @Override
  public void setLogWriter(PrintWriter out) throws SQLException {
    delegate.setLogWriter(out);
  }

  @Override
  public void setLoginTimeout(int seconds) throws SQLException {
    delegate.setLoginTimeout(seconds);
  }

  @Override
  public int getLoginTimeout() throws SQLException {
    return delegate.getLoginTimeout();
  }

  @Override
  public Logger getParentLogger() {
    return Logger.getLogger(StatementCounter.class.getName());
  }

  @Override
  public <T> T unwrap(Class<T> iface) throws SQLException {
    return delegate.unwrap(iface);
  }

  @Override
  public boolean isWrapperFor(Class<?> iface) throws SQLException {
    return delegate.isWrapperFor(iface);
  }
}
