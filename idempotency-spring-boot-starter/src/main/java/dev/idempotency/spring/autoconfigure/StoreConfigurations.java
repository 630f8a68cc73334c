package dev.idempotency.spring.autoconfigure;

import dev.idempotency.KeyStoreException;
import dev.idempotency.dynamodb.DynamoDbKeyStore;
import dev.idempotency.jdbc.JdbcKeyStore;
import dev.idempotency.redis.RedisKeyStore;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spring.IdempotencyConfigurationException;
import dev.idempotency.spring.autoconfigure.IdempotencyProperties.SchemaInitialization;
import dev.idempotency.spring.autoconfigure.IdempotencyProperties.StoreType;
import io.lettuce.core.AbstractRedisClient;
import io.lettuce.core.RedisClient;
import io.lettuce.core.cluster.RedisClusterClient;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.Locale;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnSingleCandidate;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;

/**
 * The stores the starter can build on what the application already has, each offered to {@link
 * IdempotencyAutoConfiguration#idempotencyKeyStore} as a {@link StoreCandidate}: JDBC on its {@link
 * DataSource} (with the table's check at startup and the scheduled purge), Redis on its Lettuce
 * client, and DynamoDB on its {@code DynamoDbClient} (with the table's check at startup). Imported
 * by {@link IdempotencyAutoConfiguration}, as Spring Boot's own {@code DataSourceConfiguration} is
 * by its auto-configuration.
 */
final class StoreConfigurations {

  private static final Logger log = LoggerFactory.getLogger(IdempotencyAutoConfiguration.class);

  private StoreConfigurations() {}

  /** The JDBC store on the application's DataSource. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass(JdbcKeyStore.class)
  @ConditionalOnSingleCandidate(DataSource.class)
  static class Jdbc {

    @Bean
    StoreCandidate idempotencyJdbcStoreCandidate(
        DataSource dataSource, IdempotencyProperties properties) {
      IdempotencyProperties.Jdbc jdbc = properties.getJdbc();
      return new StoreCandidate(
          StoreType.JDBC,
          "the application's DataSource, table " + jdbc.getTableName(),
          () -> checked(build(dataSource, jdbc), jdbc));
    }

    private static JdbcKeyStore build(DataSource dataSource, IdempotencyProperties.Jdbc jdbc) {
      return JdbcKeyStore.builder(dataSource)
          .tableName(jdbc.getTableName())
          .createSchemaIfMissing(createSchema(jdbc.getInitializeSchema(), dataSource))
          .databaseTime(jdbc.isDatabaseTime())
          .operationTimeout(jdbc.getOperationTimeout())
          .connectionWait(jdbc.getConnectionWait())
          .synchronousOutcomes(jdbc.isSynchronousOutcomes())
          .build();
    }

    /**
     * Checks the table when the database answers (creating it first where schema initialisation is
     * on): a missing table fails the start with what to do. A database that does not answer does
     * not stop the start: calls fail closed until it does.
     */
    static JdbcKeyStore checked(JdbcKeyStore store, IdempotencyProperties.Jdbc jdbc) {
      boolean exists;
      try {
        exists = store.tableExists();
      } catch (KeyStoreException e) {
        log.warn(
            "The idempotency store's database did not answer at startup ({}): the application"
                + " starts, its idempotent calls fail closed (503) until the database answers,"
                + " and table {} is checked then",
            rootMessage(e),
            jdbc.getTableName());
        log.debug("The database's failure at startup", e);
        return store;
      }
      if (!exists) {
        throw new IdempotencyConfigurationException(
            "The idempotency table "
                + jdbc.getTableName()
                + " does not exist (or this user cannot read it), and idempotency.jdbc"
                + ".initialize-schema="
                + jdbc.getInitializeSchema().name().toLowerCase(Locale.ROOT)
                + " does not create it.",
            "Set idempotency.jdbc.initialize-schema=always to create"
                + " it at startup, or create it in your migrations: the DDL is "
                + store.dialect().schemaResource()
                + " in the idempotency-jdbc jar (placeholders ${table} and ${name}), or"
                + " JdbcKeyStore.schemaSql(dialect, table) filled in");
      }
      return store;
    }

    private static String rootMessage(Throwable e) {
      Throwable root = e;
      while (root.getCause() != null && root.getCause() != root) {
        root = root.getCause();
      }
      return root.getClass().getSimpleName() + ": " + root.getMessage();
    }

    private static boolean createSchema(SchemaInitialization mode, DataSource dataSource) {
      return switch (mode) {
        case ALWAYS -> true;
        case NEVER -> false;
        case EMBEDDED -> isEmbedded(dataSource);
      };
    }

    /**
     * An in-memory database, which starts empty every time: H2, HSQLDB or Derby in memory. A
     * database that cannot be reached is not one of them (an in-memory database always answers).
     */
    static boolean isEmbedded(DataSource dataSource) {
      try (Connection connection = dataSource.getConnection()) {
        String url = connection.getMetaData().getURL();
        return url != null
            && (url.startsWith("jdbc:h2:mem:")
                || url.startsWith("jdbc:hsqldb:mem:")
                || url.startsWith("jdbc:derby:memory:"));
      } catch (SQLException | RuntimeException e) {
        log.debug("Could not connect to read the DataSource's URL: not an in-memory database", e);
        return false;
      }
    }

    /**
     * Deletes expired rows on a schedule, when the store is JDBC (the starter's or the
     * application's own {@link JdbcKeyStore} bean).
     */
    @Bean
    @ConditionalOnMissingBean
    @ConditionalOnProperty(
        prefix = "idempotency.jdbc.purge",
        name = "enabled",
        havingValue = "true",
        matchIfMissing = true)
    JdbcPurgeSchedule idempotencyJdbcPurgeSchedule(
        ObjectProvider<KeyStore> store, IdempotencyProperties properties) {
      try {
        return new JdbcPurgeSchedule(
            () -> store.getIfUnique() instanceof JdbcKeyStore jdbc ? jdbc : null,
            properties.getJdbc().getPurge());
      } catch (IllegalArgumentException e) {
        // the message names the property; no cause, so that this is the root cause Boot shows
        throw new IdempotencyConfigurationException(
            e.getMessage() + ".",
            "Set idempotency.jdbc.purge.interval to a positive duration (such as 1h) and"
                + " idempotency.jdbc.purge.batch-size to 1 or more, or set"
                + " idempotency.jdbc.purge.enabled=false and purge expired rows yourself.");
      }
    }
  }

  /** The Redis store on a Lettuce client the application already has. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass({RedisKeyStore.class, RedisClient.class})
  static class Redis {

    private static StoreCandidate candidate(
        AbstractRedisClient client, String description, IdempotencyProperties properties) {
      return new StoreCandidate(
          StoreType.REDIS,
          description,
          () -> {
            RedisKeyStore.Builder builder =
                client instanceof RedisClusterClient cluster
                    ? RedisKeyStore.builder(cluster)
                    : RedisKeyStore.builder((RedisClient) client);
            return builder
                .keyPrefix(properties.getRedis().getKeyPrefix())
                .operationTimeout(properties.getRedis().getOperationTimeout())
                .build();
          });
    }

    /** A {@link RedisClient} or {@link RedisClusterClient} bean of the application's. */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnSingleCandidate(AbstractRedisClient.class)
    static class FromClientBean {
      @Bean
      StoreCandidate idempotencyRedisClientStoreCandidate(
          AbstractRedisClient client, IdempotencyProperties properties) {
        return candidate(client, "the application's Lettuce client", properties);
      }
    }

    /** The Lettuce client behind Spring Data Redis's connection factory. */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(LettuceConnectionFactory.class)
    @ConditionalOnSingleCandidate(LettuceConnectionFactory.class)
    @ConditionalOnMissingBean(AbstractRedisClient.class)
    static class FromSpringDataRedis {
      @Bean
      StoreCandidate idempotencyDataRedisStoreCandidate(
          LettuceConnectionFactory factory, IdempotencyProperties properties) {
        return new StoreCandidate(
            StoreType.REDIS,
            "Spring Data Redis's Lettuce connection",
            () -> {
              AbstractRedisClient client = factory.getNativeClient();
              if (client == null) {
                factory.start();
                client = factory.getNativeClient();
              }
              return candidate(client, "", properties).store().get();
            });
      }
    }
  }

  /** The DynamoDB store on the application's {@link DynamoDbClient}. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass({DynamoDbKeyStore.class, DynamoDbClient.class})
  @ConditionalOnSingleCandidate(DynamoDbClient.class)
  static class DynamoDb {

    @Bean
    StoreCandidate idempotencyDynamoDbStoreCandidate(
        DynamoDbClient client, IdempotencyProperties properties) {
      IdempotencyProperties.DynamoDb dynamo = properties.getDynamodb();
      return new StoreCandidate(
          StoreType.DYNAMODB,
          "the application's DynamoDbClient, table " + dynamo.getTableName(),
          () -> checked(client, dynamo));
    }

    private static DynamoDbKeyStore.Builder builder(
        DynamoDbClient client, IdempotencyProperties.DynamoDb dynamo) {
      return DynamoDbKeyStore.builder(client)
          .tableName(dynamo.getTableName())
          .keyPrefix(dynamo.getKeyPrefix())
          .operationTimeout(dynamo.getOperationTimeout())
          .attemptTimeout(dynamo.getAttemptTimeout())
          .maxAttempts(dynamo.getMaxAttempts());
    }

    /**
     * Checks the table when DynamoDB answers (creating it where {@code create-table-if-missing} is
     * on): a missing table fails the start with what to do. DynamoDB that does not answer does not
     * stop the start, as for JDBC: calls fail closed until it does.
     */
    static DynamoDbKeyStore checked(DynamoDbClient client, IdempotencyProperties.DynamoDb dynamo) {
      DynamoDbKeyStore store = builder(client, dynamo).build();
      boolean exists;
      try {
        exists = store.tableExists();
      } catch (KeyStoreException e) {
        log.warn(
            "DynamoDB did not answer at startup ({}): the application starts, its idempotent"
                + " calls fail closed (503) until DynamoDB answers; table {} was not checked{}",
            Jdbc.rootMessage(e),
            dynamo.getTableName(),
            dynamo.isCreateTableIfMissing()
                ? " nor created (it is created at the next start)"
                : "");
        log.debug("DynamoDB's failure at startup", e);
        return store;
      }
      if (exists) {
        return store;
      }
      if (dynamo.isCreateTableIfMissing()) {
        return builder(client, dynamo).createTableIfMissing(true).build();
      }
      throw new IdempotencyConfigurationException(
          "The idempotency DynamoDB table "
              + dynamo.getTableName()
              + " does not exist (or these credentials cannot describe it), and"
              + " idempotency.dynamodb.create-table-if-missing is false.",
          "Create it with your"
              + " infrastructure code (partition key \""
              + DynamoDbKeyStore.DEFAULT_PARTITION_KEY
              + "\" of type S, TTL on attribute \""
              + DynamoDbKeyStore.DEFAULT_TTL_ATTRIBUTE
              + "\"; docs/stores.md), or set idempotency.dynamodb.create-table-if-missing=true to"
              + " create it at startup");
    }
  }
}
