package dev.idempotency.spring;

import dev.idempotency.testservers.Dynalite;
import java.net.URI;
import java.time.Duration;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.http.urlconnection.UrlConnectionHttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;

/**
 * {@link DynamoDbClient}s as an application on AWS builds its own: here on the dynalite this JVM's
 * tests share (any signature, any region), through the JDK's HTTP client.
 */
public final class DynaliteClients {

  private DynaliteClients() {}

  /**
   * A client of the shared dynalite, started on first use.
   *
   * @return a new client
   */
  public static DynamoDbClient shared() {
    return client(Dynalite.shared().endpoint());
  }

  /**
   * A client of the DynamoDB API at {@code endpoint}.
   *
   * @param endpoint where it answers
   * @return a new client
   */
  public static DynamoDbClient client(URI endpoint) {
    return DynamoDbClient.builder()
        .endpointOverride(endpoint)
        .region(Region.US_EAST_1)
        .credentialsProvider(
            StaticCredentialsProvider.create(AwsBasicCredentials.create("test", "test")))
        .httpClient(
            UrlConnectionHttpClient.builder()
                .connectionTimeout(Duration.ofSeconds(2))
                .socketTimeout(Duration.ofSeconds(5))
                .build())
        .build();
  }
}
