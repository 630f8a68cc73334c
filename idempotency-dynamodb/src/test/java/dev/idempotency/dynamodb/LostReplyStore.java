package dev.idempotency.dynamodb;

import dev.idempotency.testservers.Dynalite;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.TestInstance;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;

/**
 * A store on the shared dynalite whose HTTP client can lose a reply after dynalite applied the
 * request ({@link LostReplyHttpClient}), for the lost-reply tests; one table per test class.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
abstract class LostReplyStore {

  LostReplyHttpClient http;
  DynamoDbClient client;
  DynamoDbKeyStore store;

  /** The table this class's tests use. */
  abstract String tableName();

  @BeforeAll
  void start() {
    http = new LostReplyHttpClient(DynaliteClients.http().build());
    client = DynaliteClients.client(Dynalite.shared().endpoint(), http);
    store =
        DynamoDbKeyStore.builder(client)
            .tableName(tableName())
            .operationTimeout(DynamoDbKeyStoreTest.TEST_OPERATION_TIMEOUT)
            .attemptTimeout(DynamoDbKeyStoreTest.TEST_OPERATION_TIMEOUT)
            .createTableIfMissing(true)
            .build();
  }

  @AfterAll
  void stop() {
    store.close();
    client.close();
  }
}
