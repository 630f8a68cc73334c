package dev.idempotency.dynamodb;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.KeyStoreException;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.testservers.Dynalite;
import dev.idempotency.testservers.FreePorts;
import dev.idempotency.testservers.Poll;
import java.time.Duration;
import java.time.Instant;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;

/**
 * probeL: a take-back of a takeover and a renewal under the same token, both sent while dynalite is
 * stopped (SIGSTOP), both failing on the store's timeouts, then dynalite let go: it runs what it
 * was sent in its own order. The guard's background take-back (UnsentClaims: the same fenced call
 * again until the store answers) then leaves the takeover lapsed under an ended token whatever the
 * stalled requests did: the old token renews nothing and the next claim takes over as attempt 3.
 * Passes (the token fence holds).
 */
class StalledTakeBackProbeTest {

  private static final Duration TTL = Duration.ofHours(1);

  @Test
  void aTakeBackAndARenewalStalledTogetherEndLapsedOnceTheStoreIsBack() throws Exception {
    try (Dynalite dynalite = new Dynalite(FreePorts.next())) {
      DynamoDbClient client = DynaliteClients.client(dynalite.endpoint());
      DynamoDbKeyStore store =
          DynamoDbKeyStore.builder(client)
              .tableName("idem_stalled_takeback")
              .createTableIfMissing(true)
              .operationTimeout(Duration.ofSeconds(2))
              .attemptTimeout(Duration.ofSeconds(1))
              .build();
      boolean resumed = true;
      try {
        String keyId = "stalled" + UUID.randomUUID().toString().replace("-", "");
        Instant now = Instant.now();
        Poll.within(Duration.ofSeconds(60))
            .every(Duration.ofMillis(50))
            .ignoring(KeyStoreException.class)
            .until(
                "the table created and the first claim answered",
                () ->
                    store.claim(
                        request(keyId, "first", now.minusSeconds(10), Duration.ofSeconds(1))),
                result -> true);
        assertThat(store.claim(request(keyId, "taken-back", now, Duration.ofMinutes(10))))
            .isEqualTo(new ClaimResult.Claimed(2, true));

        dynalite.pause();
        resumed = false;
        CompletableFuture<Object> takeBack =
            CompletableFuture.supplyAsync(
                () -> attempt(() -> store.takeBack(keyId, "taken-back", now)));
        CompletableFuture<Object> renewal =
            CompletableFuture.supplyAsync(
                () ->
                    attempt(
                        () ->
                            store.extend(
                                new ExtendRequest(
                                    keyId, "taken-back", Duration.ofMinutes(10), now))));
        Object tookBack = takeBack.get(60, TimeUnit.SECONDS);
        Object renewed = renewal.get(60, TimeUnit.SECONDS);
        dynalite.resume();
        resumed = true;
        assertThat(tookBack)
            .as("the take-back sent to the stopped store")
            .asString()
            .startsWith("failed");
        assertThat(renewed)
            .as("the renewal sent to the stopped store")
            .asString()
            .startsWith("failed");

        // the guard's background take-back: the same fenced call until the store answers
        Boolean retried =
            Poll.within(Duration.ofSeconds(60))
                .every(Duration.ofMillis(100))
                .ignoring(KeyStoreException.class)
                .until(
                    "the store answers the take-back again",
                    () -> store.takeBack(keyId, "taken-back", Instant.now()),
                    answer -> true);

        String what =
            "stalled take-back: "
                + tookBack
                + ", stalled renewal: "
                + renewed
                + ", retry: "
                + retried;
        assertThat(
                store.extend(
                    new ExtendRequest(keyId, "taken-back", Duration.ofMinutes(10), Instant.now())))
            .as("a renewal under the token taken back, after the store is back (%s)", what)
            .isFalse();
        assertThat(store.claim(request(keyId, "next", Instant.now(), Duration.ofMinutes(10))))
            .as("the next claim (%s)", what)
            .isEqualTo(new ClaimResult.Claimed(3, true));
      } finally {
        if (!resumed) {
          dynalite.resume();
        }
        store.close();
        client.close();
      }
    }
  }

  private static Object attempt(java.util.function.Supplier<Boolean> call) {
    try {
      return call.get();
    } catch (KeyStoreException e) {
      return "failed: " + e.getClass().getSimpleName();
    }
  }

  private static ClaimRequest request(String keyId, String token, Instant now, Duration lease) {
    return new ClaimRequest(keyId, token, "", now, lease, TTL, true, null);
  }
}
