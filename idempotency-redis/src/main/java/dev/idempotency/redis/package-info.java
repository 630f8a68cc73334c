/**
 * The Redis key store, through Lettuce: one hash per record, Lua scripts for atomic fenced writes,
 * standalone, Sentinel and Cluster. Start with {@link
 * dev.idempotency.redis.RedisKeyStore#builder(io.lettuce.core.RedisClient)}.
 */
package dev.idempotency.redis;
