package dev.idempotency.reliability;

import dev.idempotency.testservers.EmbeddedRedisCluster;
import java.util.stream.Collectors;

/**
 * Starts each store that processes can share, for as long as one test needs it, and hands the test
 * its spec for {@link Stores#open}: PostgreSQL, MariaDB, Redis, a three-master Redis Cluster and
 * DynamoDB (dynalite).
 */
final class SharedStores {
  private SharedStores() {}

  /** A test that runs on one store, given by its spec. */
  interface OnStore {
    void run(String spec) throws Exception;
  }

  static void postgresql(OnStore test) throws Exception {
    try (RestartablePostgres postgres = new RestartablePostgres()) {
      test.run(postgres.url());
    }
  }

  static void mariadb(OnStore test) throws Exception {
    try (EmbeddedMariaDb mariadb = new EmbeddedMariaDb()) {
      test.run(mariadb.url());
    }
  }

  static void redis(OnStore test) throws Exception {
    try (RestartableRedis redis = new RestartableRedis(false)) {
      test.run(redis.uri());
    }
  }

  static void dynamodb(OnStore test) throws Exception {
    try (RestartableDynalite dynalite = new RestartableDynalite()) {
      test.run(dynalite.spec());
    }
  }

  static void redisCluster(OnStore test) throws Exception {
    try (EmbeddedRedisCluster cluster = new EmbeddedRedisCluster()) {
      test.run(
          "cluster:"
              + cluster.ports.stream()
                  .map(port -> "redis://127.0.0.1:" + port)
                  .collect(Collectors.joining(",")));
    }
  }
}
