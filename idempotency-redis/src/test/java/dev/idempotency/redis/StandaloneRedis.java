package dev.idempotency.redis;

import dev.idempotency.testservers.FreePorts;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import redis.embedded.RedisServer;

/**
 * A standalone Redis server for one test class (the embedded binary on a free port, no snapshots),
 * with a client for the stores under test and one connection for the test's own commands. Closing
 * it closes the connection, the client and the server, whatever started.
 */
final class StandaloneRedis implements AutoCloseable {

  private final RedisServer server;
  private final RedisClient client;
  private final StatefulRedisConnection<String, String> admin;

  private StandaloneRedis(
      RedisServer server, RedisClient client, StatefulRedisConnection<String, String> admin) {
    this.server = server;
    this.client = client;
    this.admin = admin;
  }

  /** Starts a server on a free port and connects to it. */
  static StandaloneRedis start() throws Exception {
    int port = FreePorts.next();
    RedisServer server =
        RedisServer.builder().port(port).setting("bind 127.0.0.1").setting("save \"\"").build();
    server.start();
    RedisClient client = null;
    try {
      client = RedisClient.create(RedisURI.create("redis://127.0.0.1:" + port));
      return new StandaloneRedis(server, client, client.connect());
    } catch (RuntimeException e) {
      if (client != null) {
        client.shutdown();
      }
      server.stop();
      throw e;
    }
  }

  /** The client the stores under test are built on. */
  RedisClient client() {
    return client;
  }

  /** The test's own connection's commands (to damage values, change settings, list keys). */
  RedisCommands<String, String> admin() {
    return admin.sync();
  }

  @Override
  public void close() throws Exception {
    try {
      admin.close();
      client.shutdown();
    } finally {
      server.stop();
    }
  }
}
