/**
 * An idempotency SDK for notification sends: at most one send per key within a window.
 *
 * <p>Start with {@link dev.idempotency.IdempotencyGuard}: wrap each provider call in {@code
 * guard.execute(key, ttl, sender)}. Build keys with {@link dev.idempotency.IdempotencyKey}, pick
 * windows with {@link dev.idempotency.IdempotencyWindows}, observe outcomes with an {@link
 * dev.idempotency.IdempotencyListener}. Stores live in {@code dev.idempotency.inmemory}, {@code
 * dev.idempotency.jdbc} and {@code dev.idempotency.redis}; the SPI for new ones in {@code
 * dev.idempotency.spi}.
 *
 * <p>This is not exactly-once delivery: a process that dies after the provider accepted a message
 * and before the outcome was recorded can cause one more send after its lease expires. {@link
 * dev.idempotency.SendContext#providerKey()} lets a deduplicating provider absorb that.
 */
@NullMarked
package dev.idempotency;

import org.jspecify.annotations.NullMarked;
