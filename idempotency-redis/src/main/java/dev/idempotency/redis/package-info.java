/**
 * The Redis key store, through Lettuce: one string per record, claimed with {@code SET NX GET}, Lua
 * scripts for fenced writes; standalone, Sentinel and Cluster. Start with {@link
 * dev.idempotency.redis.RedisKeyStore#builder(io.lettuce.core.RedisClient)}.
 */
@NullMarked
package dev.idempotency.redis;

import org.jspecify.annotations.NullMarked;
