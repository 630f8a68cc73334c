package dev.idempotency.dynamodb;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spi.StoredRecord;
import dev.idempotency.testservers.Dynalite;
import java.time.Duration;
import java.time.Instant;
import java.util.Random;
import org.junit.jupiter.api.Test;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;

/**
 * The largest item the store writes fits DynamoDB's item limit: a result of {@value
 * DynamoDbKeyStore#DEFAULT_MAX_PAYLOAD_BYTES} bytes beside the longest key prefix, key id,
 * fingerprint and raw key (1,024 characters of three UTF-8 bytes each).
 */
class DynamoDbItemLimitTest {

  @Test
  void aResultAtTheLimitWithTheLongestRawKeyAndPrefixIsStoredByteExact() {
    try (DynamoDbClient client = DynaliteClients.client(Dynalite.shared().endpoint());
        DynamoDbKeyStore store =
            DynamoDbKeyStore.builder(client)
                .tableName("idempotency-item-limit")
                .keyPrefix("p".repeat(64))
                .operationTimeout(DynamoDbKeyStoreTest.TEST_OPERATION_TIMEOUT)
                .attemptTimeout(DynamoDbKeyStoreTest.TEST_OPERATION_TIMEOUT)
                .createTableIfMissing(true)
                .build()) {
      Instant now = Instant.now();
      String keyId = "k".repeat(ClaimRequest.MAX_KEY_ID_LENGTH);
      ClaimRequest request =
          new ClaimRequest(
              keyId,
              "owner",
              "f".repeat(64),
              now,
              Duration.ofMinutes(1),
              Duration.ofHours(1),
              true,
              "\u4e2d".repeat(1_024));
      assertThat(store.claim(request)).isInstanceOf(ClaimResult.Claimed.class);
      byte[] payload = new byte[DynamoDbKeyStore.DEFAULT_MAX_PAYLOAD_BYTES];
      new Random(7).nextBytes(payload);

      assertThat(
              store.complete(
                  new CompleteRequest(keyId, "owner", RecordState.COMPLETED, payload, now)))
          .isTrue();

      StoredRecord record = store.find(keyId, now).orElseThrow();
      assertThat(record.payload()).isEqualTo(payload);
    }
  }
}
