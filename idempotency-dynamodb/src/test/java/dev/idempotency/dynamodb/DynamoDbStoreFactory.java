package dev.idempotency.dynamodb;

import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.KeyStoreFactory;
import java.net.URI;

/** Opens the DynamoDB store in the second JVM of the cross-process race. Config: endpoint|table. */
public final class DynamoDbStoreFactory implements KeyStoreFactory {

  @Override
  public KeyStore open(String config) {
    String[] parts = config.split("\\|", 2);
    return DynamoDbKeyStore.builder(DynaliteClients.client(URI.create(parts[0])))
        .tableName(parts[1])
        .operationTimeout(DynamoDbKeyStoreTest.TEST_OPERATION_TIMEOUT)
        .attemptTimeout(DynamoDbKeyStoreTest.TEST_OPERATION_TIMEOUT)
        .build();
  }
}
