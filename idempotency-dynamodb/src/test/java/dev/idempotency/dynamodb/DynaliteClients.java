package dev.idempotency.dynamodb;

import java.net.URI;
import java.time.Duration;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.http.SdkHttpClient;
import software.amazon.awssdk.http.urlconnection.UrlConnectionHttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;

/** Clients of a dynalite: any signature is accepted, any region; the JDK's HTTP client. */
final class DynaliteClients {

  private DynaliteClients() {}

  static DynamoDbClient client(URI endpoint) {
    return client(endpoint, UrlConnectionHttpClient.builder().build());
  }

  static DynamoDbClient client(URI endpoint, SdkHttpClient http) {
    return DynamoDbClient.builder()
        .endpointOverride(endpoint)
        .region(Region.US_EAST_1)
        .credentialsProvider(
            StaticCredentialsProvider.create(AwsBasicCredentials.create("test", "test")))
        .httpClient(http)
        .build();
  }

  static UrlConnectionHttpClient.Builder http() {
    return UrlConnectionHttpClient.builder()
        .connectionTimeout(Duration.ofSeconds(2))
        .socketTimeout(Duration.ofSeconds(5));
  }
}
