/**
 * The store test kit: extend {@link dev.idempotency.tck.KeyStoreContract} (or {@link
 * dev.idempotency.tck.SharedKeyStoreContract} for a store shared between processes) and {@link
 * dev.idempotency.tck.GuardOnStoreContract} in your store's tests, against a real backend.
 */
@NullMarked
package dev.idempotency.tck;

import org.jspecify.annotations.NullMarked;
