package dev.idempotency.dynamodb;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.testservers.Dynalite;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;

/**
 * probeL (open finding, low severity: availability only, a key held at most one more lease with
 * nothing sent, no duplicate; needs two renewals of the claim in flight that land out of order):
 * DynamoDbWrites.takeBack of a takeover tries endTakeover three times (lease after now, lease not
 * after now, lease after now again), on the premise that "a lease only moves forward". It does not:
 * extend sets lease_until = its own now + lease, fenced by the token only, so an older renewal
 * landing after a newer one moves the lease back. A take-back whose lease had passed by its now,
 * with a renewal landing before its second request (lease moved after now) and an older one before
 * its third (lease moved back), applies none of the three, answers false, and leaves the record
 * under the claim's own token: a later renewal of that token then gives it a live lease, the very
 * revival 7b0fc29 ended (KeyStore.takeBack: "no later extend ... under the old token can change it
 * again"). The renewals are sent from a second client just before the take-back's second and third
 * UpdateItem (InterceptedHttpClient.beforeNext), with the request times a keeper and a late answer
 * would carry.
 */
@Tag("open-finding")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class TakeBackLeaseMovedBackProbeTest {

  private static final Duration TTL = Duration.ofHours(1);

  private DynamoDbClient otherClient;
  private DynamoDbKeyStore other;
  private InterceptedHttpClient http;
  private DynamoDbClient client;
  private DynamoDbKeyStore store;

  @BeforeAll
  void start() {
    http = new InterceptedHttpClient(DynaliteClients.http().build());
    client = DynaliteClients.client(Dynalite.shared().endpoint(), http);
    store = build(client);
    otherClient = DynaliteClients.client(Dynalite.shared().endpoint());
    other = build(otherClient);
  }

  private static DynamoDbKeyStore build(DynamoDbClient client) {
    return DynamoDbKeyStore.builder(client)
        .tableName("idempotency-takeback-moved-back")
        .createTableIfMissing(true)
        .operationTimeout(DynamoDbKeyStoreTest.TEST_OPERATION_TIMEOUT)
        .attemptTimeout(DynamoDbKeyStoreTest.TEST_OPERATION_TIMEOUT)
        .build();
  }

  @AfterAll
  void stop() {
    store.close();
    client.close();
    other.close();
    otherClient.close();
  }

  @Test
  void aTakeBackWhoseLeaseMovesForwardThenBackEndsTheTokenAllTheSame() {
    String keyId = "movedback" + UUID.randomUUID().toString().replace("-", "");
    Instant t0 = Instant.now();
    assertThat(store.claim(request(keyId, "first", t0.minusSeconds(10), Duration.ofSeconds(1))))
        .isEqualTo(new ClaimResult.Claimed(1, false));
    assertThat(store.claim(request(keyId, "taken-back", t0, Duration.ofSeconds(1))))
        .isEqualTo(new ClaimResult.Claimed(2, true));
    Instant now = t0.plusSeconds(5); // the take-back's now: the takeover's lease ended at t0 + 1 s
    List<Boolean> renewals = new ArrayList<>();

    http.beforeNext(
        "UpdateItem",
        firstTry ->
            http.beforeNext(
                "UpdateItem",
                secondTry -> {
                  // a renewal sent at the take-back's now lands before its second request
                  renewals.add(other.extend(renewal(keyId, now, Duration.ofMinutes(10))));
                  http.beforeNext(
                      "UpdateItem",
                      // an older renewal (sent at t0 + 2 s, its answer late) lands before the third
                      thirdTry ->
                          renewals.add(
                              other.extend(
                                  renewal(keyId, t0.plusSeconds(2), Duration.ofSeconds(1)))));
                }));
    boolean takenBack = store.takeBack(keyId, "taken-back", now);

    assertThat(renewals).as("both renewals landed, in that order").containsExactly(true, true);
    boolean revived = other.extend(renewal(keyId, now, Duration.ofMinutes(10)));
    ClaimResult next = store.claim(request(keyId, "next", now, Duration.ofMinutes(10)));
    assertThat(revived)
        .as(
            "a renewal under the token taken back, after the take-back (which answered %s; the"
                + " next claim then got %s)",
            takenBack, next)
        .isFalse();
    assertThat(next).isEqualTo(new ClaimResult.Claimed(3, true));
  }

  private static ExtendRequest renewal(String keyId, Instant at, Duration lease) {
    return new ExtendRequest(keyId, "taken-back", lease, at);
  }

  private static ClaimRequest request(String keyId, String token, Instant now, Duration lease) {
    return new ClaimRequest(keyId, token, "", now, lease, TTL, true, null);
  }
}
