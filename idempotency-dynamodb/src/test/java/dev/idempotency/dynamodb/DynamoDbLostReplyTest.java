package dev.idempotency.dynamodb;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.StoredRecord;
import dev.idempotency.testservers.Dynalite;
import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;

/**
 * A write that DynamoDB applied but whose reply was lost (the connection broke on the way back), so
 * that the SDK sends it again: the store must take the repeat for what it is, not for a refusal.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class DynamoDbLostReplyTest {

  private InterceptedHttpClient http;
  private DynamoDbClient client;
  private DynamoDbKeyStore store;

  @BeforeAll
  void startStore() {
    http = new InterceptedHttpClient(DynaliteClients.http().build());
    client = DynaliteClients.client(Dynalite.shared().endpoint(), http);
    store =
        DynamoDbKeyStore.builder(client)
            .tableName("idempotency-lost-reply")
            .createTableIfMissing(true)
            .operationTimeout(DynamoDbKeyStoreTest.TEST_OPERATION_TIMEOUT)
            .attemptTimeout(DynamoDbKeyStoreTest.TEST_OPERATION_TIMEOUT)
            .build();
  }

  @AfterAll
  void stopStore() {
    store.close();
    client.close();
  }

  /**
   * A renewal past a short window moves the window's end with the lease, in its second request; if
   * that request's reply is lost, its repeat finds the window already moved. Taking that for "no
   * longer ours" would stop the renewals of a live send and let another process take it over while
   * it still sends: a second send.
   */
  @Test
  void aRenewalPastTheWindowWhoseReplyWasLostIsStillARenewal() {
    String keyId = UUID.randomUUID().toString();
    Instant now = Instant.now().truncatedTo(ChronoUnit.MILLIS); // the store keeps milliseconds
    ClaimRequest claim =
        new ClaimRequest(
            keyId, "owner", "", now, Duration.ofSeconds(1), Duration.ofSeconds(2), true, null);
    assertThat(store.claim(claim)).isInstanceOf(ClaimResult.Claimed.class);
    long lostBefore = http.repliesLost();
    http.loseTheReplyOfNext("UpdateItem", "#retain_until = :lease"); // the second request

    boolean renewed = store.extend(new ExtendRequest(keyId, "owner", Duration.ofSeconds(5), now));

    assertThat(http.repliesLost()).as("the reply was lost once").isEqualTo(lostBefore + 1);
    assertThat(renewed).as("the owner's renewal went through").isTrue();
    StoredRecord record = store.find(keyId, now).orElseThrow();
    assertThat(record.leaseDeadline()).isEqualTo(now.plusSeconds(5));
    assertThat(record.retentionDeadline()).isEqualTo(now.plusSeconds(5));
    ClaimResult other =
        store.claim(
            new ClaimRequest(
                keyId,
                "other",
                "",
                now.plusSeconds(3),
                Duration.ofSeconds(1),
                Duration.ofSeconds(2),
                true,
                null));
    assertThat(other)
        .as("held by its owner past the old lease")
        .isInstanceOf(ClaimResult.Existing.class);
  }

  /**
   * A claim whose reply was lost finds, on the SDK's repeat, its own new item: that is its claim,
   * not another caller's in progress (which would leave the key unusable until its lease ends).
   */
  @Test
  void aClaimWhoseReplyWasLostIsStillAClaim() {
    String keyId = UUID.randomUUID().toString();
    Instant now = Instant.now();
    long lostBefore = http.repliesLost();
    http.loseTheReplyOfNext("PutItem", keyId);

    ClaimResult result =
        store.claim(
            new ClaimRequest(
                keyId, "owner", "", now, Duration.ofMinutes(1), Duration.ofHours(1), true, null));

    assertThat(http.repliesLost()).isEqualTo(lostBefore + 1);
    assertThat(result).isEqualTo(new ClaimResult.Claimed(1, false));
  }

  /** The same for a takeover of a lapsed lease whose reply was lost. */
  @Test
  void aTakeoverWhoseReplyWasLostIsStillATakeover() {
    String keyId = UUID.randomUUID().toString();
    Instant now = Instant.now();
    store.claim(
        new ClaimRequest(
            keyId, "crashed", "", now, Duration.ofSeconds(1), Duration.ofHours(1), true, null));
    long lostBefore = http.repliesLost();
    http.loseTheReplyOfNext("UpdateItem", "#attempt = :attempt");

    ClaimResult result =
        store.claim(
            new ClaimRequest(
                keyId,
                "taker",
                "",
                now.plusSeconds(2),
                Duration.ofMinutes(1),
                Duration.ofHours(1),
                true,
                null));

    assertThat(http.repliesLost()).isEqualTo(lostBefore + 1);
    assertThat(result).isEqualTo(new ClaimResult.Claimed(2, true));
  }
}
