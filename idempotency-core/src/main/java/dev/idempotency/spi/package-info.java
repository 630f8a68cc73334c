/**
 * The storage SPI: what a backend must do so that {@link dev.idempotency.IdempotencyGuard} can keep
 * its promise of at most one send per key within a window.
 *
 * <p>The SPI is deliberately storage-level. A {@link dev.idempotency.spi.KeyStore} stores one
 * record per key id and performs three atomic operations on it: {@code claim}, {@code complete} and
 * {@code release} (and {@code extend}, the lease renewal, and {@code takeBack}, which gives back a
 * claim nothing was sent under as if it had lapsed). It never sees raw keys, never decodes results
 * and never decides what a caller should do; the guard owns the algorithm, the codecs, waiting and
 * replay. Contention is a return value ({@link dev.idempotency.spi.ClaimResult.Existing}), not an
 * exception.
 *
 * <p>A new backend (DynamoDB, MongoDB, Cassandra with LWT, ...) implements {@link
 * dev.idempotency.spi.KeyStore} and proves itself by extending the {@code KeyStoreContract} test
 * suite shipped in {@code idempotency-core}'s test-jar.
 */
@NullMarked
package dev.idempotency.spi;

import org.jspecify.annotations.NullMarked;
