package dev.idempotency.dynamodb;

import dev.idempotency.KeyStoreException;
import java.time.Duration;
import java.util.function.Supplier;
import software.amazon.awssdk.awscore.AwsRequestOverrideConfiguration;
import software.amazon.awssdk.awscore.exception.AwsServiceException;
import software.amazon.awssdk.awscore.retry.AwsRetryStrategy;
import software.amazon.awssdk.core.SdkPlugin;
import software.amazon.awssdk.core.exception.AbortedException;
import software.amazon.awssdk.core.exception.ApiCallAttemptTimeoutException;
import software.amazon.awssdk.core.exception.ApiCallTimeoutException;
import software.amazon.awssdk.core.exception.SdkClientException;
import software.amazon.awssdk.core.exception.SdkException;
import software.amazon.awssdk.retries.api.BackoffStrategy;
import software.amazon.awssdk.retries.api.RetryStrategy;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;
import software.amazon.awssdk.services.dynamodb.DynamoDbServiceClientConfiguration;
import software.amazon.awssdk.services.dynamodb.model.ProvisionedThroughputExceededException;
import software.amazon.awssdk.services.dynamodb.model.RequestLimitExceededException;
import software.amazon.awssdk.services.dynamodb.model.ResourceNotFoundException;

/**
 * How the store sends a request: the client the user gave, with the store's own time bounds and
 * retries on every request (not the client's defaults), and every SDK failure mapped to a {@link
 * KeyStoreException} at this one place. A failed condition ({@code
 * ConditionalCheckFailedException}) is not a failure and is left to the caller.
 */
final class Requests {

  /** Retries wait 25 ms, doubling up to 250 ms (with jitter), so that they fit the bound. */
  static final Duration BACKOFF_BASE = Duration.ofMillis(25);

  static final Duration BACKOFF_MAX = Duration.ofMillis(250);

  /** Throttled retries wait 100 ms, doubling up to 500 ms (with jitter). */
  static final Duration THROTTLED_BACKOFF_BASE = Duration.ofMillis(100);

  static final Duration THROTTLED_BACKOFF_MAX = Duration.ofMillis(500);

  private final DynamoDbClient client;
  private final String table;
  private final Duration operationTimeout;
  private final int maxAttempts;
  private final AwsRequestOverrideConfiguration override;

  Requests(
      DynamoDbClient client,
      String table,
      Duration operationTimeout,
      Duration attemptTimeout,
      int maxAttempts) {
    this.client = client;
    this.table = table;
    this.operationTimeout = operationTimeout;
    this.maxAttempts = maxAttempts;
    RetryStrategy retries =
        AwsRetryStrategy.standardRetryStrategy().toBuilder()
            .maxAttempts(maxAttempts)
            .backoffStrategy(BackoffStrategy.exponentialDelay(BACKOFF_BASE, BACKOFF_MAX))
            .throttlingBackoffStrategy(
                BackoffStrategy.exponentialDelay(THROTTLED_BACKOFF_BASE, THROTTLED_BACKOFF_MAX))
            .build();
    SdkPlugin retryPlugin =
        configuration -> {
          DynamoDbServiceClientConfiguration.Builder dynamo =
              (DynamoDbServiceClientConfiguration.Builder) configuration;
          dynamo.overrideConfiguration(
              dynamo.overrideConfiguration().toBuilder().retryStrategy(retries).build());
        };
    this.override =
        AwsRequestOverrideConfiguration.builder()
            .apiCallTimeout(operationTimeout)
            .apiCallAttemptTimeout(attemptTimeout)
            .addPlugin(retryPlugin)
            .build();
  }

  DynamoDbClient client() {
    return client;
  }

  String table() {
    return table;
  }

  /** The per-request configuration: the store's timeouts and retries. */
  AwsRequestOverrideConfiguration override() {
    return override;
  }

  /**
   * Sends one request, mapping a failure of DynamoDB or of the way to it to {@link
   * KeyStoreException}.
   */
  <T> T send(String operation, Supplier<T> request) {
    try {
      return request.get();
    } catch (software.amazon.awssdk.services.dynamodb.model.ConditionalCheckFailedException e) {
      throw e;
    } catch (SdkException e) {
      throw failure(operation, e);
    }
  }

  KeyStoreException failure(String operation, SdkException e) {
    String what = "DynamoDB store: " + operation + " on table " + table;
    if (e instanceof ProvisionedThroughputExceededException
        || e instanceof RequestLimitExceededException
        || (e instanceof AwsServiceException service && service.isThrottlingException())) {
      return new KeyStoreException(
          what + " was throttled (after up to " + maxAttempts + " attempts): " + e.getMessage(), e);
    }
    if (e instanceof ResourceNotFoundException) {
      return new KeyStoreException(
          what
              + " failed: the table does not exist (create it as docs/stores.md shows, or build the"
              + " store with createTableIfMissing(true))",
          e);
    }
    if (e instanceof ApiCallTimeoutException || e instanceof ApiCallAttemptTimeoutException) {
      return new KeyStoreException(
          what + " got no answer within its operation timeout (" + operationTimeout + ")", e);
    }
    if (e instanceof AbortedException) {
      Thread.currentThread().interrupt();
      return new KeyStoreException(what + " was interrupted", e);
    }
    if (e instanceof SdkClientException) {
      return new KeyStoreException(what + " could not reach DynamoDB: " + e.getMessage(), e);
    }
    return new KeyStoreException(what + " failed: " + e.getMessage(), e);
  }
}
