package dev.idempotency.spring.autoconfigure;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.ResultCodec;
import dev.idempotency.TakeoverPolicy;
import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.jdbc.JdbcKeyStore;
import dev.idempotency.redis.RedisKeyStore;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spring.EmbeddedServers;
import dev.idempotency.spring.JsonCodecs;
import dev.idempotency.spring.app.Receipt;
import io.lettuce.core.RedisClient;
import java.sql.Connection;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import javax.sql.DataSource;
import org.h2.jdbcx.JdbcDataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.core.ParameterizedTypeReference;

/**
 * The store choice and the beans of {@link IdempotencyAutoConfiguration}, each on a real store: H2
 * and PostgreSQL for JDBC, an embedded redis-server for Redis.
 */
@ExtendWith(OutputCaptureExtension.class)
class IdempotencyAutoConfigurationTest {

  final ApplicationContextRunner runner =
      new ApplicationContextRunner()
          .withConfiguration(AutoConfigurations.of(IdempotencyAutoConfiguration.class));

  static DataSource h2() {
    JdbcDataSource dataSource = new JdbcDataSource();
    dataSource.setURL("jdbc:h2:mem:auto-" + UUID.randomUUID() + ";DB_CLOSE_DELAY=-1");
    return dataSource;
  }

  /**
   * A client that has connected once: the store's own first connection must come within its
   * connection wait (5 s), and on a busy machine a JVM's first Lettuce connection (Netty's start,
   * class loading) alone took longer (seen at load 35: "could not connect within 5000 ms").
   */
  static RedisClient redisClient() {
    RedisClient client = RedisClient.create("redis://127.0.0.1:" + EmbeddedServers.redisPort());
    try (var connection = client.connect()) {
      connection.sync().ping();
    }
    return client;
  }

  /**
   * The purge's default statement size is the store's, 5,000 rows: on a 10-million-row PostgreSQL
   * table under 16 sending threads, 1,000-row statements deleted 30,013 and 31,956 rows a second,
   * 5,000-row ones 79,645 and 67,866, with the senders' p99 under 2x (BENCHMARKS.md, run 14).
   */
  @Test
  void thePurgeDeletesFiveThousandRowsAStatementByDefaultAsTheStoreDoes() {
    assertThat(new IdempotencyProperties().getJdbc().getPurge().getBatchSize())
        .isEqualTo(dev.idempotency.jdbc.JdbcPurger.DEFAULT_BATCH_SIZE)
        .isEqualTo(5_000);
  }

  @Test
  void withNothingElseTheStoreIsInMemoryWithAWarning(CapturedOutput output) {
    runner.run(
        context -> {
          assertThat(context).hasSingleBean(IdempotencyGuard.class);
          assertThat(context.getBean(KeyStore.class)).isInstanceOf(InMemoryKeyStore.class);
          String sent =
              context
                  .getBean(IdempotencyGuard.class)
                  .execute("otp:1", Duration.ofHours(1), ctx -> "n_1");
          assertThat(sent).isEqualTo("n_1");
        });
    assertThat(output)
        .contains("Idempotency store: memory")
        .contains("kept in this JVM's memory: they are lost on restart");
  }

  @Test
  void aDataSourceGivesTheJdbcStoreWithItsTableOnAnEmbeddedDatabase(CapturedOutput output) {
    runner
        .withBean(DataSource.class, IdempotencyAutoConfigurationTest::h2)
        .run(
            context -> {
              assertThat(context.getBean(KeyStore.class)).isInstanceOf(JdbcKeyStore.class);
              IdempotencyGuard guard = context.getBean(IdempotencyGuard.class);
              String first = guard.execute("otp:1", Duration.ofHours(1), ctx -> "n_1");
              String repeat = guard.execute("otp:1", Duration.ofHours(1), ctx -> "n_2");
              assertThat(first).isEqualTo("n_1");
              assertThat(repeat).isEqualTo("n_1");
              assertThat(tableExists(context.getBean(DataSource.class), "IDEMPOTENCY_RECORDS"))
                  .isTrue();
            });
    assertThat(output).contains("Idempotency store: jdbc").doesNotContain("JVM's memory");
  }

  @Test
  void aDataSourceAndRedisTogetherChooseJdbc() {
    RedisClient client = redisClient();
    try {
      runner
          .withBean(DataSource.class, IdempotencyAutoConfigurationTest::h2)
          .withBean(RedisClient.class, () -> client)
          .run(
              context ->
                  assertThat(context.getBean(KeyStore.class)).isInstanceOf(JdbcKeyStore.class));
    } finally {
      client.shutdown();
    }
  }

  @Test
  void aRedisClientAloneGivesTheRedisStoreWithItsPrefix() {
    RedisClient client = redisClient();
    try {
      runner
          .withBean(RedisClient.class, () -> client)
          .withPropertyValues(
              "idempotency.redis.key-prefix=boot:idem:", "idempotency.redis.operation-timeout=1s")
          .run(
              context -> {
                KeyStore store = context.getBean(KeyStore.class);
                assertThat(store).isInstanceOf(RedisKeyStore.class);
                assertThat(((RedisKeyStore) store).redisKey("x")).isEqualTo("boot:idem:x");
                IdempotencyGuard guard = context.getBean(IdempotencyGuard.class);
                String key = "otp:" + UUID.randomUUID();
                assertThat(guard.execute(key, Duration.ofHours(1), ctx -> "n_1")).isEqualTo("n_1");
                assertThat(guard.execute(key, Duration.ofHours(1), ctx -> "n_2")).isEqualTo("n_1");
              });
    } finally {
      client.shutdown();
    }
  }

  @Test
  void outcomesSkipTheDiskFlushUnlessTheApplicationAsksForIt() {
    runner
        .withBean(DataSource.class, IdempotencyAutoConfigurationTest::h2)
        .run(
            context ->
                assertThat(
                        context
                            .getBean(IdempotencyProperties.class)
                            .getJdbc()
                            .isSynchronousOutcomes())
                    .isFalse());
    runner
        .withBean(DataSource.class, IdempotencyAutoConfigurationTest::h2)
        .withPropertyValues("idempotency.jdbc.synchronous-outcomes=true")
        .run(
            context -> {
              assertThat(
                      context
                          .getBean(IdempotencyProperties.class)
                          .getJdbc()
                          .isSynchronousOutcomes())
                  .isTrue();
              assertThat(context.getBean(KeyStore.class)).isInstanceOf(JdbcKeyStore.class);
            });
  }

  @Test
  void theStorePropertyPicksMemoryEvenWithADataSource() {
    runner
        .withBean(DataSource.class, IdempotencyAutoConfigurationTest::h2)
        .withPropertyValues("idempotency.store=memory")
        .run(
            context ->
                assertThat(context.getBean(KeyStore.class)).isInstanceOf(InMemoryKeyStore.class));
  }

  @Test
  void aStoreThePropertyNamesButTheApplicationLacksFailsAtStartupWithAClearMessage() {
    runner
        .withPropertyValues("idempotency.store=redis")
        .run(
            context -> {
              assertThat(context).hasFailed();
              assertThat(context.getStartupFailure())
                  .rootCause()
                  .hasMessageContaining("idempotency.store=redis")
                  .hasMessageContaining("no Lettuce connection factory or RedisClient bean");
            });
  }

  @Test
  void aKeyStoreBeanOfTheApplicationWins() {
    InMemoryKeyStore own = InMemoryKeyStore.builder().maximumSize(10).build();
    runner
        .withBean(DataSource.class, IdempotencyAutoConfigurationTest::h2)
        .withBean("ownStore", KeyStore.class, () -> own)
        .run(
            context -> {
              assertThat(context).hasSingleBean(KeyStore.class);
              assertThat(context.getBean(KeyStore.class)).isSameAs(own);
              assertThat(context.getBean(IdempotencyGuard.class).store()).isSameAs(own);
            });
  }

  @Test
  void anIdempotencyGuardBeanOfTheApplicationWins() {
    IdempotencyGuard own =
        IdempotencyGuard.builder().store(InMemoryKeyStore.builder().build()).build();
    runner
        .withBean(IdempotencyGuard.class, () -> own)
        .run(context -> assertThat(context.getBean(IdempotencyGuard.class)).isSameAs(own));
  }

  @Test
  void initializeSchemaNeverWithoutTheTableFailsTheStartSayingWhatToDo() {
    runner
        .withBean(DataSource.class, IdempotencyAutoConfigurationTest::h2)
        .withPropertyValues(
            "idempotency.jdbc.initialize-schema=never", "idempotency.jdbc.table-name=idem_never")
        .run(
            context -> {
              assertThat(context).hasFailed();
              Throwable root = context.getStartupFailure();
              while (root.getCause() != null) {
                root = root.getCause();
              }
              assertThat(root)
                  .hasMessageContaining("idem_never")
                  .hasMessageContaining("idempotency.jdbc.initialize-schema=always")
                  .hasMessageContaining("dev/idempotency/jdbc/schema-h2.sql");
            });
  }

  @Test
  void propertiesBindInBootsDurationFormats() {
    runner
        .withPropertyValues(
            "idempotency.lease=45s",
            "idempotency.in-flight-wait=PT0.5S",
            "idempotency.default-ttl=72h",
            "idempotency.takeover-policy=refuse",
            "idempotency.fail-open=true",
            "idempotency.http.max-body-size=64KB")
        .run(
            context -> {
              IdempotencyProperties properties = context.getBean(IdempotencyProperties.class);
              assertThat(properties.getLease()).isEqualTo(Duration.ofSeconds(45));
              assertThat(properties.getInFlightWait()).isEqualTo(Duration.ofMillis(500));
              assertThat(properties.getDefaultTtl()).isEqualTo(Duration.ofHours(72));
              assertThat(properties.getTakeoverPolicy()).isEqualTo(TakeoverPolicy.REFUSE);
              assertThat(properties.isFailOpen()).isTrue();
              assertThat(properties.getHttp().getMaxBodySize().toKilobytes()).isEqualTo(64);
            });
  }

  @Test
  void propertyDefaultsAreTheLibrarysDefaults() {
    IdempotencyProperties defaults = new IdempotencyProperties();

    assertThat(defaults.getLease()).isEqualTo(IdempotencyGuard.DEFAULT_LEASE);
    assertThat(defaults.getInFlightWait()).isEqualTo(IdempotencyGuard.DEFAULT_IN_FLIGHT_WAIT);
    assertThat(defaults.getMemory().getMaximumSize())
        .isEqualTo(InMemoryKeyStore.DEFAULT_MAXIMUM_SIZE);
    assertThat(defaults.getJdbc().getTableName()).isEqualTo(JdbcKeyStore.DEFAULT_TABLE_NAME);
    assertThat(defaults.getJdbc().getOperationTimeout())
        .isEqualTo(JdbcKeyStore.DEFAULT_OPERATION_TIMEOUT);
    assertThat(defaults.getRedis().getKeyPrefix()).isEqualTo(RedisKeyStore.DEFAULT_KEY_PREFIX);
    assertThat(defaults.getRedis().getOperationTimeout())
        .isEqualTo(RedisKeyStore.DEFAULT_OPERATION_TIMEOUT);
    assertThat(defaults.getDefaultTtl()).isEqualTo(Duration.ofHours(24));
    assertThat(defaults.getMaxPendingOutcomes())
        .isEqualTo(IdempotencyGuard.DEFAULT_MAX_PENDING_OUTCOMES);
    assertThat(defaults.getHttp().getHeader()).isEqualTo("Idempotency-Key");
  }

  @Test
  void maxPendingOutcomesReachesTheGuard() {
    runner
        .withPropertyValues("idempotency.max-pending-outcomes=0")
        .run(context -> assertThat(context).hasNotFailed().hasSingleBean(IdempotencyGuard.class));
    runner
        .withPropertyValues("idempotency.max-pending-outcomes=-1")
        .run(
            context ->
                assertThat(context)
                    .getFailure()
                    .rootCause()
                    .hasMessageContaining("maxPendingOutcomes must not be negative, was -1"));
  }

  @Test
  void aCustomizerBeanChangesWhatNoPropertyDoes() {
    runner
        .withBean(
            IdempotencyGuardCustomizer.class,
            () -> builder -> builder.storeRawKeys(true).leaseRenewal(false))
        .run(context -> assertThat(context).hasNotFailed().hasSingleBean(IdempotencyGuard.class));
  }

  @Test
  void theJsonCodecsComeFromTheApplicationsMapperAndKeepGenericTypes() {
    new ApplicationContextRunner()
        .withConfiguration(
            AutoConfigurations.of(
                JacksonAutoConfigurations.jackson(), IdempotencyAutoConfiguration.class))
        .run(
            context -> {
              JsonCodecs json = context.getBean(JsonCodecs.class);
              assertThat(json)
                  .as("Boot 4 configures Jackson 3, Boot 3.5 Jackson 2")
                  .isInstanceOf(
                      isPresent(
                              "org.springframework.boot.jackson.autoconfigure"
                                  + ".JacksonAutoConfiguration")
                          ? dev.idempotency.spring.Jackson3JsonCodecs.class
                          : dev.idempotency.spring.Jackson2JsonCodecs.class);
              ResultCodec<List<Receipt>> codec =
                  json.codecFor(new ParameterizedTypeReference<List<Receipt>>() {}.getType());
              List<Receipt> receipts = List.of(new Receipt("n_1", "sms", 2));
              assertThat(codec.decode(codec.encode(receipts))).isEqualTo(receipts);
              ResultCodec<Optional<Receipt>> optional =
                  json.codecFor(new ParameterizedTypeReference<Optional<Receipt>>() {}.getType());
              assertThat(optional.decode(optional.encode(Optional.empty()))).isEmpty();
              assertThat(optional.decode(optional.encode(Optional.of(receipts.get(0)))))
                  .contains(receipts.get(0));
            });
  }

  static boolean isPresent(String className) {
    try {
      Class.forName(className);
      return true;
    } catch (ClassNotFoundException e) {
      return false;
    }
  }

  static boolean tableExists(DataSource dataSource, String table) throws Exception {
    try (Connection connection = dataSource.getConnection();
        ResultSet tables = connection.getMetaData().getTables(null, null, table, null)) {
      return tables.next();
    }
  }
}
