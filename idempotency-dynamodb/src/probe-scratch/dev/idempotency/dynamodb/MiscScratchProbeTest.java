package dev.idempotency.dynamodb;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.KeyStoreException;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.testservers.Dynalite;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;
import software.amazon.awssdk.services.dynamodb.model.AttributeDefinition;
import software.amazon.awssdk.services.dynamodb.model.BillingMode;
import software.amazon.awssdk.services.dynamodb.model.KeySchemaElement;
import software.amazon.awssdk.services.dynamodb.model.KeyType;
import software.amazon.awssdk.services.dynamodb.model.ScalarAttributeType;

/** Scratch probes of issue 40 that held. */
class MiscScratchProbeTest {

  private static final Duration TTL = Duration.ofHours(1);

  @Test
  void lostRepliesOfCompleteAndReleaseAreHarmless() {
    LostReplyHttpClient http = new LostReplyHttpClient(DynaliteClients.http().build());
    try (DynamoDbClient client = DynaliteClients.client(Dynalite.shared().endpoint(), http);
        DynamoDbKeyStore store =
            DynamoDbKeyStore.builder(client)
                .tableName("idempotency-lost-reply")
                .operationTimeout(Duration.ofSeconds(15))
                .attemptTimeout(Duration.ofSeconds(15))
                .createTableIfMissing(true)
                .build();
        IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build()) {
      AtomicInteger sends = new AtomicInteger();
      String key = "lost-complete:" + UUID.randomUUID();
      http.loseNextReplies("UpdateItem", 1);
      assertThat(guard.execute(key, TTL, ctx -> "sent " + sends.incrementAndGet()))
          .isEqualTo("sent 1");
      assertThat(http.lost()).isEqualTo(1);
      assertThat(
              guard
                  .executeForOutcome(
                      dev.idempotency.IdempotencyRequest.of(key, TTL),
                      dev.idempotency.ResultCodec.string(),
                      ctx -> "again")
                  .replayed())
          .isTrue();
      assertThat(guard.execute(key, TTL, ctx -> "sent " + sends.incrementAndGet()))
          .isEqualTo("sent 1");
      // empty result
      String empty = "lost-complete-empty:" + UUID.randomUUID();
      http.loseNextReplies("UpdateItem", 1);
      assertThat(guard.execute(empty, TTL, ctx -> "")).isEqualTo("");
      assertThat(guard.execute(empty, TTL, ctx -> "x")).isEqualTo("");
      // release
      String failed = "lost-release:" + UUID.randomUUID();
      http.loseNextReplies("DeleteItem", 1);
      assertThatThrownBy(
              () ->
                  guard.execute(
                      failed,
                      TTL,
                      ctx -> {
                        throw new IllegalStateException("provider down");
                      }))
          .isInstanceOf(IllegalStateException.class);
      assertThat(guard.execute(failed, TTL, ctx -> "retried")).isEqualTo("retried");
    }
  }

  @Test
  void createTableIfMissingRacingIn8ThreadsAllSucceed() throws Exception {
    String table = "idempotency-race-" + UUID.randomUUID().toString().substring(0, 8);
    ExecutorService pool = Executors.newFixedThreadPool(8);
    try (DynamoDbClient client = DynaliteClients.client(Dynalite.shared().endpoint())) {
      CountDownLatch go = new CountDownLatch(1);
      List<Future<DynamoDbKeyStore>> stores = new ArrayList<>();
      for (int i = 0; i < 8; i++) {
        stores.add(
            pool.submit(
                () -> {
                  go.await();
                  return DynamoDbKeyStore.builder(client)
                      .tableName(table)
                      .createTableIfMissing(true)
                      .operationTimeout(Duration.ofSeconds(15))
                      .attemptTimeout(Duration.ofSeconds(15))
                      .build();
                }));
      }
      go.countDown();
      for (Future<DynamoDbKeyStore> f : stores) {
        DynamoDbKeyStore store = f.get(2, TimeUnit.MINUTES);
        assertThat(store.tableExists()).isTrue();
        store.close();
      }
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void aTableWithAnotherKeySchemaFailsClosed() {
    String table = "idempotency-wrong-" + UUID.randomUUID().toString().substring(0, 8);
    try (DynamoDbClient client = DynaliteClients.client(Dynalite.shared().endpoint())) {
      client.createTable(
          c ->
              c.tableName(table)
                  .billingMode(BillingMode.PAY_PER_REQUEST)
                  .attributeDefinitions(
                      AttributeDefinition.builder()
                          .attributeName("pk")
                          .attributeType(ScalarAttributeType.S)
                          .build())
                  .keySchema(
                      KeySchemaElement.builder()
                          .attributeName("pk")
                          .keyType(KeyType.HASH)
                          .build()));
      DynamoDbKeyStore store =
          DynamoDbKeyStore.builder(client)
              .tableName(table)
              .createTableIfMissing(true) // waits for ACTIVE
              .operationTimeout(Duration.ofSeconds(15))
              .attemptTimeout(Duration.ofSeconds(15))
              .build();
      assertThat(store.tableExists()).as("the start-up check sees a table").isTrue();
      ClaimRequest request =
          new ClaimRequest(
              "k" + UUID.randomUUID().toString().replace("-", ""),
              "o",
              "",
              Instant.now(),
              Duration.ofMinutes(1),
              TTL,
              true,
              null);
      assertThatThrownBy(() -> store.claim(request)).isInstanceOf(KeyStoreException.class);
      store.close();
    }
  }

  @Test
  void forgetRefusesARunningCall() throws Exception {
    try (DynamoDbClient client = DynaliteClients.client(Dynalite.shared().endpoint());
        DynamoDbKeyStore store =
            DynamoDbKeyStore.builder(client)
                .tableName("idempotency-lost-reply")
                .createTableIfMissing(true)
                .operationTimeout(Duration.ofSeconds(15))
                .attemptTimeout(Duration.ofSeconds(15))
                .build();
        IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build()) {
      String key = "forget:" + UUID.randomUUID();
      CountDownLatch inSender = new CountDownLatch(1);
      CountDownLatch release = new CountDownLatch(1);
      AtomicInteger sends = new AtomicInteger();
      Future<String> running =
          Executors.newSingleThreadExecutor()
              .submit(
                  () ->
                      guard.execute(
                          key,
                          TTL,
                          ctx -> {
                            sends.incrementAndGet();
                            inSender.countDown();
                            release.await();
                            return "first";
                          }));
      assertThat(inSender.await(60, TimeUnit.SECONDS)).isTrue();
      assertThat(guard.forget(key)).isFalse();
      release.countDown();
      assertThat(running.get(60, TimeUnit.SECONDS)).isEqualTo("first");
      assertThat(guard.execute(key, TTL, ctx -> "second")).isEqualTo("first");
      assertThat(guard.forget(key)).isTrue();
      assertThat(guard.execute(key, TTL, ctx -> "second")).isEqualTo("second");
      assertThat(sends).hasValue(1);
    }
  }
}
