package dev.idempotency.jdbc;

import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.KeyStoreFactory;
import org.jdbi.v3.core.Jdbi;

/** Opens the JDBC store in the second JVM of the cross-process race. Config: {@code url|table}. */
public final class JdbcStoreFactory implements KeyStoreFactory {

  @Override
  public KeyStore open(String config) {
    int bar = config.lastIndexOf('|');
    return JdbcKeyStore.builder(Jdbi.create(config.substring(0, bar)))
        .tableName(config.substring(bar + 1))
        .build();
  }
}
