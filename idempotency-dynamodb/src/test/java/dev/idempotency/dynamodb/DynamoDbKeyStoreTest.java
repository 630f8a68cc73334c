package dev.idempotency.dynamodb;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.GuardOnStoreContract;
import dev.idempotency.tck.KeyStoreFactory;
import dev.idempotency.tck.SharedKeyStoreContract;
import dev.idempotency.testservers.Dynalite;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.TestInstance;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;

/** The store contract, the guard's promises and the second process's race, on a real dynalite. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class DynamoDbKeyStoreTest extends SharedKeyStoreContract {

  private static final String TABLE = "idempotency-contract";

  /** Generous: the store's default (2 s) is for DynamoDB, not for a loaded emulator. */
  static final java.time.Duration TEST_OPERATION_TIMEOUT = java.time.Duration.ofSeconds(15);

  private Dynalite dynalite;
  private DynamoDbClient client;
  private DynamoDbKeyStore store;

  @BeforeAll
  void startDynalite() {
    dynalite = Dynalite.shared();
    client = DynaliteClients.client(dynalite.endpoint());
    store =
        DynamoDbKeyStore.builder(client)
            .tableName(TABLE)
            .operationTimeout(TEST_OPERATION_TIMEOUT)
            .attemptTimeout(TEST_OPERATION_TIMEOUT)
            .createTableIfMissing(true)
            .build();
    assertThat(store.tableExists()).isTrue();
  }

  @AfterAll
  void closeStore() {
    if (store != null) {
      store.close();
      client.close();
    }
  }

  @Override
  protected KeyStore store() {
    return store;
  }

  /** The guard's promises on this store. */
  @Nested
  class OnTheGuard extends GuardOnStoreContract {
    @Override
    protected KeyStore store() {
      return DynamoDbKeyStoreTest.this.store();
    }
  }

  @Override
  protected Class<? extends KeyStoreFactory> factoryClass() {
    return DynamoDbStoreFactory.class;
  }

  @Override
  protected String factoryConfig() {
    return dynalite.endpoint() + "|" + TABLE;
  }
}
