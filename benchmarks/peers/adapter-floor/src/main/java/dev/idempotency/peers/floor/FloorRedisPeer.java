package dev.idempotency.peers.floor;

import dev.idempotency.peers.driver.Peer;
import dev.idempotency.peers.driver.PeerContext;
import dev.idempotency.peers.driver.Sender;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.SetArgs;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;

/**
 * The two-command floor of a guard that stores results on Redis, as a plain Lettuce user writes it
 * on one shared connection: {@code SET key marker NX GET PX ttl} claims a new key (or returns what
 * is stored), then {@code SET key result KEEPTTL} stores the result. A repeat that finds the marker
 * polls with {@code GET} until the result is there. No lease, no owner fence, no record encoding:
 * not a library, the least any storing library sends.
 *
 * <p>With {@code -Dfloor.shape=set-nx} it sends Camel's one command instead, {@code SET key key NX
 * EX ttl}, and stores no result: Camel's round trip on this adapter's Lettuce, to tell the client
 * library's part of a round trip from Spring's and Camel's (BENCHMARKS.md, run 11).
 */
public final class FloorRedisPeer implements Peer {

    private static final String IN_PROGRESS = "\u0000in-progress";
    private static final boolean SET_NX = "set-nx".equals(System.getProperty("floor.shape"));

    private RedisClient client;
    private StatefulRedisConnection<String, String> connection;
    private RedisCommands<String, String> redis;
    private Sender sender;
    private long ttlMillis;

    @Override
    public String name() {
        return "floor-redis";
    }

    @Override
    public String library() {
        return "io.lettuce:lettuce-core:7.7.0.RELEASE, two commands (no library)";
    }

    @Override
    public String store() {
        return "redis";
    }

    @Override
    public boolean storesResult() {
        return !SET_NX;
    }

    @Override
    public void setup(PeerContext ctx) {
        sender = ctx.sender();
        ttlMillis = ctx.ttl().toMillis();
        client = RedisClient.create(RedisURI.create(ctx.redisHost(), ctx.redisPort()));
        connection = client.connect();
        redis = connection.sync();
    }

    @Override
    public String firstSendOrReplay(String key) throws Exception {
        String redisKey = "floor:" + key;
        if (SET_NX) {
            String ok = redis.set(redisKey, key, SetArgs.Builder.nx().ex(ttlMillis / 1000));
            return ok != null ? sender.send(key) : null;
        }
        String stored = redis.setGet(redisKey, IN_PROGRESS, SetArgs.Builder.nx().px(ttlMillis));
        if (stored == null) {
            String result = sender.send(key);
            redis.set(redisKey, result, SetArgs.Builder.keepttl());
            return result;
        }
        for (int polls = 0; IN_PROGRESS.equals(stored) && polls < 10_000; polls++) {
            Thread.sleep(1);
            stored = redis.get(redisKey);
        }
        return stored;
    }

    @Override
    public void teardown() {
        if (connection != null) {
            connection.close();
        }
        if (client != null) {
            client.shutdown();
        }
    }
}
