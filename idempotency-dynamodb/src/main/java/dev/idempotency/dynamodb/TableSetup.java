package dev.idempotency.dynamodb;

import dev.idempotency.KeyStoreException;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import software.amazon.awssdk.core.exception.SdkException;
import software.amazon.awssdk.services.dynamodb.model.AttributeDefinition;
import software.amazon.awssdk.services.dynamodb.model.BillingMode;
import software.amazon.awssdk.services.dynamodb.model.DynamoDbException;
import software.amazon.awssdk.services.dynamodb.model.KeySchemaElement;
import software.amazon.awssdk.services.dynamodb.model.KeyType;
import software.amazon.awssdk.services.dynamodb.model.ResourceInUseException;
import software.amazon.awssdk.services.dynamodb.model.ResourceNotFoundException;
import software.amazon.awssdk.services.dynamodb.model.ScalarAttributeType;
import software.amazon.awssdk.services.dynamodb.model.TableStatus;

/**
 * Creates the table if it is missing (on-demand capacity, a string partition key) and turns on
 * DynamoDB's TTL on the TTL attribute, then waits, polling {@code DescribeTable}, until it is
 * active (the SDK's own waiter sleeps about 20 s before its first look).
 */
final class TableSetup {

  private static final Logger log = LoggerFactory.getLogger(TableSetup.class);
  private static final long POLL_MILLIS = 100;

  private TableSetup() {}

  /** Whether the table exists (and is usable): one {@code DescribeTable}. */
  static boolean exists(Requests requests) {
    try {
      return requests.send("check the table", () -> status(requests)) != null;
    } catch (KeyStoreException e) {
      if (e.getCause() instanceof ResourceNotFoundException) {
        return false;
      }
      throw e;
    }
  }

  static void createIfMissing(Requests requests, Items items, Duration wait) {
    if (!exists(requests)) {
      try {
        requests.send(
            "create the table",
            () ->
                requests
                    .client()
                    .createTable(
                        create ->
                            create
                                .tableName(requests.table())
                                .billingMode(BillingMode.PAY_PER_REQUEST)
                                .attributeDefinitions(
                                    AttributeDefinition.builder()
                                        .attributeName(items.partitionKey())
                                        .attributeType(ScalarAttributeType.S)
                                        .build())
                                .keySchema(
                                    KeySchemaElement.builder()
                                        .attributeName(items.partitionKey())
                                        .keyType(KeyType.HASH)
                                        .build())
                                .overrideConfiguration(requests.override())));
        log.info("DynamoDB store: created table {}", requests.table());
      } catch (KeyStoreException e) {
        if (!(e.getCause() instanceof ResourceInUseException)) {
          throw e; // not another instance creating it at the same moment
        }
      }
    }
    awaitActive(requests, wait);
    enableTtl(requests, items);
  }

  private static TableStatus status(Requests requests) {
    return requests
        .client()
        .describeTable(
            describe ->
                describe.tableName(requests.table()).overrideConfiguration(requests.override()))
        .table()
        .tableStatus();
  }

  private static void awaitActive(Requests requests, Duration wait) {
    long deadline = System.nanoTime() + wait.toNanos();
    while (requests.send("check the table", () -> status(requests)) != TableStatus.ACTIVE) {
      if (System.nanoTime() > deadline) {
        throw new KeyStoreException(
            "DynamoDB store: table " + requests.table() + " did not become active in " + wait,
            null);
      }
      LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(POLL_MILLIS));
    }
  }

  /**
   * Turns on TTL; logs instead of failing where that is refused (already on, or an emulator such as
   * dynalite that has no TTL): the store checks every record's window itself.
   */
  private static void enableTtl(Requests requests, Items items) {
    try {
      requests
          .client()
          .updateTimeToLive(
              ttl ->
                  ttl.tableName(requests.table())
                      .timeToLiveSpecification(
                          spec -> spec.attributeName(items.ttlAttribute()).enabled(true))
                      .overrideConfiguration(requests.override()));
    } catch (DynamoDbException e) {
      log.info(
          "DynamoDB store: TTL on {}.{} not turned on ({}); expired records count as absent but"
              + " are not removed until it is",
          requests.table(),
          items.ttlAttribute(),
          e.awsErrorDetails() == null ? e.getMessage() : e.awsErrorDetails().errorCode());
    } catch (SdkException e) {
      throw requests.failure("turn on TTL", e);
    }
  }
}
