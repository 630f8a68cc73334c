package dev.idempotency.dynamodb;

import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.TakeBackRaceProbe;
import dev.idempotency.testservers.Dynalite;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.TestInstance;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;

/**
 * probeL: the take-back's conditional writes (delete of a first attempt, endTakeover's three
 * conditional updates) raced by renewals, completions and third callers on a real dynalite.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class DynamoDbTakeBackRaceProbeTest extends TakeBackRaceProbe {

  private DynamoDbClient client;
  private DynamoDbKeyStore store;

  @BeforeAll
  void startDynalite() {
    client = DynaliteClients.client(Dynalite.shared().endpoint());
    store =
        DynamoDbKeyStore.builder(client)
            .tableName("idempotency-takeback-race")
            .createTableIfMissing(true)
            .operationTimeout(DynamoDbKeyStoreTest.TEST_OPERATION_TIMEOUT)
            .attemptTimeout(DynamoDbKeyStoreTest.TEST_OPERATION_TIMEOUT)
            .build();
  }

  @AfterAll
  void close() {
    if (store != null) {
      store.close();
      client.close();
    }
  }

  @Override
  protected KeyStore store() {
    return store;
  }
}
