package dev.idempotency.reliability;

import dev.idempotency.dynamodb.DynamoDbKeyStore;
import dev.idempotency.spi.KeyStore;
import java.net.URI;
import java.time.Duration;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.http.urlconnection.UrlConnectionHttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;

/**
 * The DynamoDB store of the fault tests, on a dynalite: spec {@code dynamodb:http://host:port}. A
 * class of its own, so that {@link Stores} loads the AWS SDK only for this store.
 */
final class DynamoDbStores {

  static final String PREFIX = "dynamodb:";

  /**
   * Bounds for a dynalite on a loaded 2-core machine, where the store's defaults (2 s, 1 s an
   * attempt) are for DynamoDB; still bounded, so that a cut network fails calls instead of hanging.
   */
  static final Duration OPERATION_TIMEOUT = Duration.ofSeconds(10);

  static final Duration ATTEMPT_TIMEOUT = Duration.ofSeconds(5);

  private DynamoDbStores() {}

  static String spec(int port) {
    return PREFIX + "http://127.0.0.1:" + port;
  }

  /**
   * Opens the store on the table {@code idem_reliability}, creating it when missing (one request at
   * once, as a service's start-up check would: a store opened here is ready, and one that cannot be
   * reached makes this fail, so callers retry).
   */
  static KeyStore open(String spec) {
    DynamoDbClient client =
        client(URI.create(spec.substring(PREFIX.length())), Duration.ofSeconds(2), ATTEMPT_TIMEOUT);
    try {
      return DynamoDbKeyStore.builder(client)
          .tableName("idem_reliability")
          .createTableIfMissing(true)
          .operationTimeout(OPERATION_TIMEOUT)
          .attemptTimeout(ATTEMPT_TIMEOUT)
          .build();
    } catch (RuntimeException e) {
      client.close();
      throw e;
    }
  }

  /**
   * A client of dynalite at {@code endpoint} (signed with a test key, the URL-connection HTTP
   * client) that gives up on connecting after {@code connect} and on an answer after {@code
   * socket}.
   */
  static DynamoDbClient client(URI endpoint, Duration connect, Duration socket) {
    return DynamoDbClient.builder()
        .endpointOverride(endpoint)
        .region(Region.US_EAST_1)
        .credentialsProvider(
            StaticCredentialsProvider.create(AwsBasicCredentials.create("test", "test")))
        .httpClient(
            UrlConnectionHttpClient.builder()
                .connectionTimeout(connect)
                .socketTimeout(socket)
                .build())
        .build();
  }
}
