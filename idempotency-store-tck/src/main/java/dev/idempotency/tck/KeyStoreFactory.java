package dev.idempotency.tck;

import dev.idempotency.spi.KeyStore;

/**
 * Opens a store from a configuration string in a second JVM, for {@link SharedKeyStoreContract}.
 * Implementations need a public no-argument constructor.
 */
public interface KeyStoreFactory {

  /**
   * Opens a store on the same backend as the parent test's store.
   *
   * @param config what the parent passed: a JDBC URL, a Redis URI, ...
   * @return the store
   * @throws Exception if it cannot be opened
   */
  KeyStore open(String config) throws Exception;
}
