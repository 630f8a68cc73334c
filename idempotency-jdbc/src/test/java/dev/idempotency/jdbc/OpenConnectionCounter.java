package dev.idempotency.jdbc;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;

/** A DataSource wrapper that counts connections currently open, to prove none is held. */
final class OpenConnectionCounter extends ForwardingDataSource {

  final AtomicInteger open = new AtomicInteger();

  OpenConnectionCounter(DataSource delegate) {
    super(delegate);
  }

  @Override
  Connection wrap(Connection connection) {
    open.incrementAndGet();
    boolean[] closed = new boolean[1];
    return (Connection)
        Proxy.newProxyInstance(
            Connection.class.getClassLoader(),
            new Class<?>[] {Connection.class},
            (proxy, method, args) -> {
              if (method.getName().equals("close") && !closed[0]) {
                closed[0] = true;
                open.decrementAndGet();
              }
              try {
                return method.invoke(connection, args);
              } catch (InvocationTargetException e) {
                throw e.getCause();
              }
            });
  }
}
