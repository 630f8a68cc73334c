package dev.idempotency.spring.autoconfigure;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.dynamodb.DynamoDbKeyStore;
import dev.idempotency.jdbc.JdbcKeyStore;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spring.DynaliteClients;
import dev.idempotency.spring.actuate.StoreHealth;
import dev.idempotency.testservers.FreePorts;
import java.net.URI;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;

/**
 * The DynamoDB store in {@link IdempotencyAutoConfiguration}: a {@link DynamoDbClient} bean of the
 * application's is a candidate, after JDBC and Redis, its table checked at startup; on a real
 * dynalite.
 */
@ExtendWith(OutputCaptureExtension.class)
class DynamoDbStoreAutoConfigurationTest {

  final ApplicationContextRunner runner =
      new ApplicationContextRunner()
          .withConfiguration(AutoConfigurations.of(IdempotencyAutoConfiguration.class))
          // dynalite on a busy 2-core machine may take more than the store's default 1 s attempt
          // and 2 s operation to answer the startup check: a check that timed out starts the
          // application without its store, which a test of what the check found must not mistake
          // for its answer (the unreachable case sets its own short timeouts)
          .withPropertyValues(
              "idempotency.dynamodb.operation-timeout=30s",
              "idempotency.dynamodb.attempt-timeout=15s");

  static String table() {
    return "idem_" + UUID.randomUUID().toString().replace("-", "");
  }

  @Test
  void aDynamoDbClientAloneIsTheStoreInAutoItsTableCreatedWhenAskedAndHealthUp(
      CapturedOutput output) {
    String table = table();
    runner
        .withBean(DynamoDbClient.class, DynaliteClients::shared)
        .withPropertyValues(
            "idempotency.dynamodb.table-name=" + table,
            "idempotency.dynamodb.create-table-if-missing=true")
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              KeyStore store = context.getBean(KeyStore.class);
              assertThat(store).isInstanceOf(DynamoDbKeyStore.class);
              assertThat(((DynamoDbKeyStore) store).tableName()).isEqualTo(table);
              assertThat(((DynamoDbKeyStore) store).tableExists()).isTrue();
              assertThat(output).contains("Idempotency store: dynamodb").contains(table);

              IdempotencyGuard guard = context.getBean(IdempotencyGuard.class);
              AtomicInteger runs = new AtomicInteger();
              Duration ttl = Duration.ofHours(1);
              String first =
                  guard.execute("order-1", ttl, send -> "sent-" + runs.incrementAndGet());
              String repeat =
                  guard.execute("order-1", ttl, send -> "sent-" + runs.incrementAndGet());
              assertThat(repeat).isEqualTo(first).isEqualTo("sent-1");
              assertThat(runs).hasValue(1);

              Map<String, Object> details = new LinkedHashMap<>();
              assertThat(new StoreHealth(guard, store).check(details))
                  .isEqualTo(StoreHealth.Status.UP);
              assertThat(details).containsEntry("store", "dynamodb");
            });
  }

  @Test
  void aDataSourceAndADynamoDbClientTogetherChooseJdbc() {
    runner
        .withBean(DataSource.class, IdempotencyAutoConfigurationTest::h2)
        .withBean(DynamoDbClient.class, DynaliteClients::shared)
        .run(
            context ->
                assertThat(context.getBean(KeyStore.class)).isInstanceOf(JdbcKeyStore.class));
  }

  @Test
  void theStorePropertyPicksDynamoDbEvenWithADataSource() {
    String table = table();
    runner
        .withBean(DataSource.class, IdempotencyAutoConfigurationTest::h2)
        .withBean(DynamoDbClient.class, DynaliteClients::shared)
        .withPropertyValues(
            "idempotency.store=dynamodb",
            "idempotency.dynamodb.table-name=" + table,
            "idempotency.dynamodb.create-table-if-missing=true")
        .run(
            context ->
                assertThat(context.getBean(KeyStore.class)).isInstanceOf(DynamoDbKeyStore.class));
  }

  @Test
  void aMissingTableWithCreationOffFailsTheStartNamingTheTableAndTheProperty() {
    String table = table();
    runner
        .withBean(DynamoDbClient.class, DynaliteClients::shared)
        .withPropertyValues("idempotency.dynamodb.table-name=" + table)
        .run(
            context -> {
              assertThat(context).hasFailed();
              assertThat(context.getStartupFailure())
                  .rootCause()
                  .hasMessageContaining(table)
                  .hasMessageContaining("idempotency.dynamodb.create-table-if-missing=true");
            });
  }

  @Test
  void dynamoDbUnreachableAtStartDoesNotStopTheStart(CapturedOutput output) {
    URI nothing = URI.create("http://127.0.0.1:" + FreePorts.next());
    runner
        .withBean(DynamoDbClient.class, () -> DynaliteClients.client(nothing))
        .withPropertyValues(
            "idempotency.store=dynamodb",
            "idempotency.dynamodb.operation-timeout=1s",
            "idempotency.dynamodb.attempt-timeout=500ms")
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              assertThat(context.getBean(KeyStore.class)).isInstanceOf(DynamoDbKeyStore.class);
              assertThat(output).contains("did not answer at startup");
            });
  }

  @Test
  void storeDynamoDbWithoutAClientFailsTheStartWithAClearMessage() {
    runner
        .withPropertyValues("idempotency.store=dynamodb")
        .run(
            context -> {
              assertThat(context).hasFailed();
              assertThat(context.getStartupFailure())
                  .rootCause()
                  .hasMessageContaining("idempotency.store=dynamodb")
                  .hasMessageContaining("DynamoDbClient bean");
            });
  }

  @Test
  void theDynamoDbPropertiesBindWithTheirDefaults() {
    new ApplicationContextRunner()
        .withConfiguration(AutoConfigurations.of(IdempotencyAutoConfiguration.class))
        .withPropertyValues("idempotency.dynamodb.attempt-timeout=750ms")
        .run(
            context -> {
              IdempotencyProperties.DynamoDb dynamo =
                  context.getBean(IdempotencyProperties.class).getDynamodb();
              assertThat(dynamo.getTableName()).isEqualTo(DynamoDbKeyStore.DEFAULT_TABLE_NAME);
              assertThat(dynamo.isCreateTableIfMissing()).isFalse();
              assertThat(dynamo.getKeyPrefix()).isEqualTo(DynamoDbKeyStore.DEFAULT_KEY_PREFIX);
              assertThat(dynamo.getOperationTimeout())
                  .isEqualTo(DynamoDbKeyStore.DEFAULT_OPERATION_TIMEOUT);
              assertThat(dynamo.getAttemptTimeout()).isEqualTo(Duration.ofMillis(750));
              assertThat(dynamo.getMaxAttempts()).isEqualTo(DynamoDbKeyStore.DEFAULT_MAX_ATTEMPTS);
            });
  }
}
