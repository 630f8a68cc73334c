package dev.idempotency.spring;

import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.test.context.TestPropertySource;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;

/**
 * The {@link Idempotent} contract on DynamoDB (a real dynalite), through the application's own
 * {@link DynamoDbClient} bean, the table created at startup.
 */
@Import(DynamoDbIdempotentMethodTest.Client.class)
@TestPropertySource(
    properties = {
      "idempotency.store=dynamodb",
      "idempotency.dynamodb.table-name=idem_boot_methods",
      "idempotency.dynamodb.create-table-if-missing=true"
    })
class DynamoDbIdempotentMethodTest extends IdempotentMethodContract {

  @TestConfiguration(proxyBeanMethods = false)
  static class Client {
    @Bean(destroyMethod = "close")
    DynamoDbClient dynamoDbClient() {
      return DynaliteClients.shared();
    }
  }

  @Override
  String storeKind() {
    return "dynamodb";
  }
}
