package dev.idempotency.spring;

import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.time.Duration;
import redis.embedded.RedisServer;

/**
 * The real servers the starter's tests run against, started once per JVM on first use and stopped
 * when it exits: an embedded redis-server 7.0 and an embedded PostgreSQL 17.
 */
public final class EmbeddedServers {
  private EmbeddedServers() {}

  private static RedisServer redis;
  private static int redisPort;
  private static EmbeddedPostgres postgres;

  /** The port of the shared Redis, started if needed. */
  public static synchronized int redisPort() {
    if (redis == null) {
      redisPort = freePort();
      redis =
          RedisServer.builder()
              .port(redisPort)
              .setting("bind 127.0.0.1")
              .setting("save \"\"")
              .build();
      redis.start();
      RedisServer started = redis;
      Runtime.getRuntime().addShutdownHook(new Thread(started::stop));
    }
    return redisPort;
  }

  /** A JDBC URL of the shared PostgreSQL, started if needed. */
  public static synchronized String postgresUrl() {
    if (postgres == null) {
      try {
        postgres = EmbeddedPostgres.builder().setPGStartupWait(Duration.ofSeconds(120)).start();
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
      EmbeddedPostgres started = postgres;
      Runtime.getRuntime()
          .addShutdownHook(
              new Thread(
                  () -> {
                    try {
                      started.close();
                    } catch (IOException e) {
                      // exiting anyway
                    }
                  }));
    }
    return postgres.getJdbcUrl("postgres", "postgres");
  }

  static int freePort() {
    try (ServerSocket socket = new ServerSocket(0)) {
      return socket.getLocalPort();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
