package dev.idempotency.reliability;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.jdbc.JdbcKeyStore;
import dev.idempotency.redis.RedisKeyStore;
import dev.idempotency.spi.KeyStore;
import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.cluster.RedisClusterClient;
import java.time.Duration;
import java.util.Arrays;

/**
 * Opens a store from a text spec, the same way in the test JVM and in child JVMs: a JDBC URL (a
 * pooled data source, database time; prefixed with {@code clienttime:}, the guard's clock; prefixed
 * with {@code joined:}, the same store for a joined-transaction run, see {@link
 * OutboxFaultRunChild}), {@code redis://host:port}, {@code cluster:uri,uri,...}, or {@code
 * dynamodb:http://host:port} (a dynalite; always the guard's clock, DynamoDB has no other, so a
 * fault run prefixes it with {@code clienttime:} too).
 */
final class Stores {
  private Stores() {}

  static KeyStore open(String spec, int poolSize) {
    if (spec.startsWith(OutboxFaultRunChild.JOINED)) {
      spec = spec.substring(OutboxFaultRunChild.JOINED.length());
    }
    boolean clientTime = spec.startsWith(FaultRunChild.CLIENT_TIME);
    if (clientTime) {
      spec = spec.substring(FaultRunChild.CLIENT_TIME.length());
    }
    if (spec.startsWith(DynamoDbStores.PREFIX)) {
      return DynamoDbStores.open(spec);
    }
    if (spec.startsWith("jdbc:")) {
      HikariConfig config = new HikariConfig();
      config.setJdbcUrl(spec);
      config.setMaximumPoolSize(poolSize);
      config.setConnectionTimeout(10_000);
      JdbcKeyStore store =
          JdbcKeyStore.builder(new HikariDataSource(config))
              .tableName("idem_reliability")
              .createSchemaIfMissing(true)
              .databaseTime(!clientTime)
              .build();
      // connect and create the table now, as a service's start-up check would: a store reached
      // here is ready, and one that is not makes this fail (callers retry)
      if (!store.tableExists()) {
        throw new IllegalStateException("the table idem_reliability was not created");
      }
      return store;
    }
    RedisKeyStore store;
    if (spec.startsWith("cluster:")) {
      RedisClusterClient client =
          RedisClusterClient.create(
              Arrays.stream(spec.substring(8).split(",")).map(RedisURI::create).toList());
      store = RedisKeyStore.builder(client).build();
    } else {
      store = RedisKeyStore.builder(redisClient(spec, Duration.ofSeconds(10))).build();
    }
    // connected before the clients start, as a service's start-up check would
    if (!store.awaitConnection(Duration.ofSeconds(30))) {
      store.close();
      throw new dev.idempotency.KeyStoreException("Redis could not be reached: " + spec, null);
    }
    return store;
  }

  /** A Redis client that fails fast while disconnected and times commands out. */
  static RedisClient redisClient(String uri, Duration timeout) {
    RedisURI redisUri = RedisURI.create(uri);
    redisUri.setTimeout(timeout);
    RedisClient client = RedisClient.create(redisUri);
    client.setOptions(
        ClientOptions.builder()
            .disconnectedBehavior(ClientOptions.DisconnectedBehavior.REJECT_COMMANDS)
            .build());
    return client;
  }
}
