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
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;

/**
 * probeL's finding (low severity: availability only, a key held at most one more lease with nothing
 * sent, no duplicate; needs two renewals of the claim in flight that land out of order), fixed.
 * DynamoDbTakeBack.takeBack of a takeover tried three conditional updates (lease after now, lease
 * not after now, lease after now again), on the premise that "a lease only moves forward". It does
 * not: extend sets lease_until = its own now + lease, fenced by the token only (as JDBC's and
 * Redis's do), so an older renewal landing after a newer one moves the lease back. A take-back
 * whose lease had passed by its now, with a renewal landing before its second request (lease moved
 * after now) and an older one before its third (lease moved back), applied none of the three,
 * answered false, and left the record under the claim's own token: a later renewal of that token
 * then gave it a live lease, the very revival 7b0fc29 ended (KeyStore.takeBack: "no later extend
 * ... under the old token can change it again"). The take-back now ends the token on the token's
 * condition alone when the lease is not cut with it, and then cuts a lease that a renewal moved
 * forward on condition of the fresh token, which no renewal passes.
 *
 * <p>The renewals are sent from a second client just before the take-back's UpdateItems
 * (InterceptedHttpClient.beforeNext), with the request times a keeper and a late answer would
 * carry. The first test is the probe's interleaving (failed before the fix); the other two move the
 * lease both ways around the requests the take-back makes now.
 */
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

  @AfterEach
  void noActionLeft() {
    http.cancelBeforeNext("UpdateItem");
  }

  @AfterAll
  void stop() {
    store.close();
    client.close();
    other.close();
    otherClient.close();
  }

  /** The probe's interleaving, against the three tries before the fix: failed 1/1 there. */
  @Test
  void aTakeBackWhoseLeaseMovesForwardThenBackEndsTheTokenAllTheSame() {
    String keyId = newKey();
    Instant t0 = Instant.now();
    takeOver(keyId, t0, Duration.ofSeconds(1));
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
    http.cancelBeforeNext("UpdateItem");

    assertTakenBackForGood(keyId, now, takenBack, renewals);
  }

  /**
   * The lease had passed when the take-back read it; a renewal moves it forward before the request
   * that ends the token, and an older one lands before the next request (it would move it back).
   */
  @Test
  void aLeaseMovedForwardBeforeTheTokenEndsIsCutAndNoLaterRenewalLands() {
    String keyId = newKey();
    Instant t0 = Instant.now();
    takeOver(keyId, t0, Duration.ofSeconds(1));
    Instant now = t0.plusSeconds(5);
    List<Boolean> renewals = new ArrayList<>();

    http.beforeNext(
        "UpdateItem",
        endToken -> {
          renewals.add(other.extend(renewal(keyId, now, Duration.ofMinutes(10))));
          http.beforeNext(
              "UpdateItem",
              cutLease ->
                  renewals.add(
                      other.extend(renewal(keyId, t0.plusSeconds(2), Duration.ofSeconds(1)))));
        });
    boolean takenBack = store.takeBack(keyId, "taken-back", now);
    http.cancelBeforeNext("UpdateItem");

    assertThat(renewals).as("the renewals during the take-back").isNotEmpty();
    assertThat(renewals.get(0)).as("the renewal before the token ended landed").isTrue();
    assertThat(renewals.subList(1, renewals.size()))
        .as("the older one, if the take-back made a second request")
        .doesNotContain(true);
    assertTakenBackForGood(keyId, now, takenBack, renewals);
  }

  /**
   * The lease was live when the take-back read it; an older renewal lands before the request that
   * would cut it, and a newer one would land before the next. Since a renewal never moves a lease
   * back (fixlease: extend's conditions require {@code lease_until <= :lease}), the older one
   * leaves the live lease (and answers renewed: the claim is still its owner's), so the take-back
   * cuts it in that first request and makes no second one.
   */
  @Test
  void aLeaseMovedBackThenForwardIsCutAllTheSame() {
    String keyId = newKey();
    Instant t0 = Instant.now();
    takeOver(keyId, t0, Duration.ofMinutes(1));
    Instant now = t0.plusSeconds(5);
    List<Boolean> renewals = new ArrayList<>();

    http.beforeNext(
        "UpdateItem",
        cutWithToken -> {
          renewals.add(other.extend(renewal(keyId, t0.plusSeconds(2), Duration.ofSeconds(1))));
          http.beforeNext(
              "UpdateItem",
              endToken -> renewals.add(other.extend(renewal(keyId, now, Duration.ofMinutes(10)))));
        });
    boolean takenBack = store.takeBack(keyId, "taken-back", now);
    http.cancelBeforeNext("UpdateItem");

    assertThat(renewals)
        .as("the older renewal landed without moving the lease back; the take-back cut it at once")
        .containsExactly(true);
    assertTakenBackForGood(keyId, now, takenBack, renewals);
  }

  /** A first claim at {@code t0 - 10 s} (1 s lease), taken over at {@code t0} as "taken-back". */
  private void takeOver(String keyId, Instant t0, Duration lease) {
    assertThat(store.claim(request(keyId, "first", t0.minusSeconds(10), Duration.ofSeconds(1))))
        .isEqualTo(new ClaimResult.Claimed(1, false));
    assertThat(store.claim(request(keyId, "taken-back", t0, lease)))
        .isEqualTo(new ClaimResult.Claimed(2, true));
  }

  /**
   * The take-back said so, no later renewal under its token lands, and the next claim takes the
   * record over at once.
   */
  private void assertTakenBackForGood(
      String keyId, Instant now, boolean takenBack, List<Boolean> renewals) {
    boolean revived = other.extend(renewal(keyId, now, Duration.ofMinutes(10)));
    ClaimResult next = store.claim(request(keyId, "next", now, Duration.ofMinutes(10)));
    assertThat(revived)
        .as(
            "a renewal under the token taken back, after the take-back (which answered %s; the"
                + " renewals during it %s; the next claim then got %s)",
            takenBack, renewals, next)
        .isFalse();
    assertThat(next).isEqualTo(new ClaimResult.Claimed(3, true));
    assertThat(takenBack).as("takeBack's answer for a takeover it took back").isTrue();
  }

  private static String newKey() {
    return "movedback" + UUID.randomUUID().toString().replace("-", "");
  }

  private static ExtendRequest renewal(String keyId, Instant at, Duration lease) {
    return new ExtendRequest(keyId, "taken-back", lease, at);
  }

  private static ClaimRequest request(String keyId, String token, Instant now, Duration lease) {
    return new ClaimRequest(keyId, token, "", now, lease, TTL, true, null);
  }
}
