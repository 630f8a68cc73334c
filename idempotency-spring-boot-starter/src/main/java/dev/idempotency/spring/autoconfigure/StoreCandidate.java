package dev.idempotency.spring.autoconfigure;

import dev.idempotency.spi.KeyStore;
import java.util.function.Supplier;

/**
 * A store the application could use, offered by the configuration of its kind when what it needs is
 * there (a DataSource, a Lettuce client): {@link IdempotencyAutoConfiguration} picks one.
 *
 * @param type which kind of store
 * @param description what it runs on, for the log line that names the choice
 * @param store builds the store, only if it is picked
 */
record StoreCandidate(
    IdempotencyProperties.StoreType type, String description, Supplier<KeyStore> store) {}
