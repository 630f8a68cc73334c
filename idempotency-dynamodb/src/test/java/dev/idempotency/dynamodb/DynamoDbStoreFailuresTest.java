package dev.idempotency.dynamodb;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.KeyStoreException;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.tck.StoreRecovery;
import dev.idempotency.testservers.Dynalite;
import dev.idempotency.testservers.FreePorts;
import java.net.URI;
import java.time.Duration;
import java.time.Instant;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;

/**
 * What the store does when DynamoDB fails: throttling (which dynalite never does, so it is injected
 * at the HTTP client), an endpoint nobody listens on, a table that does not exist, and a server
 * that goes away and comes back. Each failure is a {@link KeyStoreException} within the store's
 * time bound, nothing is sent, and the same store works again afterwards.
 */
class DynamoDbStoreFailuresTest {

  private static final Duration TTL = Duration.ofHours(1);

  /** The store's bound (2 s by default) and a margin for a busy machine. */
  private static final long BOUND_MILLIS = 2_000 + 1_500;

  private static ClaimRequest claim() {
    return new ClaimRequest(
        UUID.randomUUID().toString(),
        UUID.randomUUID().toString(),
        "",
        Instant.now(),
        Duration.ofMinutes(1),
        TTL,
        true,
        null);
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded"
      })
  void throttlingIsAKeyStoreExceptionWithinTheBoundAndTheStoreRecovers(String error) {
    InterceptedHttpClient http = new InterceptedHttpClient(DynaliteClients.http().build());
    try (DynamoDbClient client = DynaliteClients.client(Dynalite.shared().endpoint(), http);
        DynamoDbKeyStore store =
            DynamoDbKeyStore.builder(client)
                .tableName("idempotency-throttled")
                .createTableIfMissing(true)
                .build()) {
      IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
      AtomicInteger sends = new AtomicInteger();
      http.answerWith(error);

      long started = System.nanoTime();
      assertThatThrownBy(() -> store.claim(claim()))
          .isInstanceOf(KeyStoreException.class)
          .hasMessageContaining("idempotency-throttled");
      long tookMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);
      assertThat(tookMillis).as("failed within the store's bound").isLessThan(BOUND_MILLIS);
      assertThat(http.answeredWithError())
          .as("retried, at most the store's 3 attempts")
          .isBetween(2L, 3L);
      assertThatThrownBy(
              () -> guard.execute("throttled", TTL, ctx -> "sent " + sends.incrementAndGet()))
          .isInstanceOf(KeyStoreException.class);
      assertThat(sends).as("nothing sent while throttled").hasValue(0);

      http.answerWith(null);
      assertThat(store.claim(claim())).isInstanceOf(ClaimResult.Claimed.class);
      guard.close();
    }
  }

  @Test
  void aThrottledClaimSaysSoWhenItsRetriesEndBeforeTheBound() {
    InterceptedHttpClient http = new InterceptedHttpClient(DynaliteClients.http().build());
    try (DynamoDbClient client = DynaliteClients.client(Dynalite.shared().endpoint(), http);
        DynamoDbKeyStore store =
            DynamoDbKeyStore.builder(client)
                .tableName("idempotency-throttled")
                .createTableIfMissing(true)
                .operationTimeout(Duration.ofSeconds(10))
                .build()) {
      http.answerWith("ProvisionedThroughputExceededException");
      assertThatThrownBy(() -> store.claim(claim()))
          .isInstanceOf(KeyStoreException.class)
          .hasMessageContaining("throttled");
      assertThat(http.answeredWithError()).isEqualTo(3);
    }
  }

  /**
   * DynamoDB leaves keys of a batch read unprocessed when it throttles, and also when a response
   * would pass its size limit: dynalite answers about 1 MB a round (DynamoDB 16 MB), so 60 results
   * of 400,000 bytes need more rounds than the store's 16. The batch fails closed and says what
   * happened; before the fix of issue 40 it said "throttled".
   */
  @Test
  void aBatchReadLeftWithUnprocessedKeysSaysSoAndClaimsNothing() {
    InterceptedHttpClient http = new InterceptedHttpClient(DynaliteClients.http().build());
    try (DynamoDbClient client = DynaliteClients.client(Dynalite.shared().endpoint(), http);
        DynamoDbKeyStore store =
            DynamoDbKeyStore.builder(client)
                .tableName("idempotency-large-batch")
                .operationTimeout(DynamoDbKeyStoreTest.TEST_OPERATION_TIMEOUT)
                .attemptTimeout(DynamoDbKeyStoreTest.TEST_OPERATION_TIMEOUT)
                .createTableIfMissing(true)
                .build()) {
      byte[] payload = new byte[DynamoDbKeyStore.DEFAULT_MAX_PAYLOAD_BYTES];
      java.util.Arrays.fill(payload, (byte) 7);
      java.util.List<ClaimRequest> batch = new java.util.ArrayList<>();
      for (int i = 0; i < 60; i++) {
        ClaimRequest request = claim();
        assertThat(store.claim(request)).isInstanceOf(ClaimResult.Claimed.class);
        assertThat(
                store.complete(
                    new dev.idempotency.spi.CompleteRequest(
                        request.keyId(),
                        request.ownerToken(),
                        dev.idempotency.spi.RecordState.COMPLETED,
                        payload,
                        request.now())))
            .isTrue();
        batch.add(request.withOwnerToken(UUID.randomUUID().toString()));
      }
      ClaimRequest absent = claim();
      batch.add(absent);
      http.resetCounts();

      assertThatThrownBy(() -> store.claimAll(batch))
          .isInstanceOf(KeyStoreException.class)
          .hasMessageContaining("idempotency-large-batch")
          .hasMessageContaining("keys unprocessed after 16 rounds")
          .hasMessageContaining("nothing was claimed");
      assertThat(http.counts()).containsEntry("BatchGetItem", 16L).doesNotContainKey("PutItem");
      assertThat(store.find(absent.keyId(), absent.now())).isEmpty();
    }
  }

  @Test
  void anEndpointNobodyListensOnIsAKeyStoreExceptionWithinTheBound() {
    URI nowhere = URI.create("http://127.0.0.1:" + FreePorts.next());
    try (DynamoDbClient client = DynaliteClients.client(nowhere, DynaliteClients.http().build());
        DynamoDbKeyStore store = DynamoDbKeyStore.builder(client).build()) {
      long started = System.nanoTime();
      assertThatThrownBy(() -> store.claim(claim()))
          .isInstanceOf(KeyStoreException.class)
          .hasMessageContaining("DynamoDB store: claim on table idempotency");
      assertThat(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started))
          .isLessThan(BOUND_MILLIS);
    }
  }

  @Test
  void aMissingTableIsNamedInTheError() {
    try (DynamoDbClient client = DynaliteClients.client(Dynalite.shared().endpoint());
        DynamoDbKeyStore store =
            DynamoDbKeyStore.builder(client).tableName("no-such-table").build()) {
      assertThat(store.tableExists()).isFalse();
      assertThatThrownBy(() -> store.claim(claim()))
          .isInstanceOf(KeyStoreException.class)
          .hasMessageContaining("no-such-table")
          .hasMessageContaining("createTableIfMissing(true)");
    }
  }

  @Test
  void aStoreWhoseDynamoDbWentAwayWorksAgainWhenItIsBack() throws Exception {
    int port = FreePorts.next();
    Dynalite first = new Dynalite(port);
    URI endpoint = first.endpoint();
    try (DynamoDbClient client = DynaliteClients.client(endpoint, DynaliteClients.http().build());
        DynamoDbKeyStore store =
            DynamoDbKeyStore.builder(client)
                .tableName("idempotency-restarted")
                .createTableIfMissing(true)
                .build();
        IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build()) {
      assertThat(guard.execute("before", TTL, ctx -> "sent")).isEqualTo("sent");
      first.close();

      AtomicInteger sends = new AtomicInteger();
      assertThatThrownBy(
              () -> guard.execute("during", TTL, ctx -> "sent " + sends.incrementAndGet()))
          .isInstanceOf(KeyStoreException.class);
      assertThat(sends).hasValue(0);

      try (Dynalite second = new Dynalite(port);
          DynamoDbClient admin = DynaliteClients.client(second.endpoint());
          DynamoDbKeyStore creator =
              DynamoDbKeyStore.builder(admin)
                  .tableName("idempotency-restarted")
                  .createTableIfMissing(true)
                  .build()) {
        // the restarted dynalite is empty: another store has created the table again
        assertThat(creator.tableExists()).isTrue();
        assertThat(
                StoreRecovery.sendOnceTheStoreAnswers(guard, "after", TTL, Duration.ofSeconds(60)))
            .isEqualTo("sent");
        assertThat(guard.execute("after", TTL, ctx -> "again")).isEqualTo("sent");
      }
    } finally {
      first.close();
    }
  }
}
