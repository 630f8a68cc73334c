package dev.idempotency.reliability;

import static dev.idempotency.reliability.StalledClaims.TTL;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.KeyStoreException;
import dev.idempotency.dynamodb.DynamoDbKeyStore;
import dev.idempotency.testservers.Dynalite;
import dev.idempotency.testservers.FreePorts;
import dev.idempotency.testservers.Poll;
import java.net.URI;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;

/**
 * Issue 37 (found by probeA): {@link RedisStalledClaimTest}'s case on DynamoDB (dynalite): the
 * server stopped with SIGSTOP while a claim is sent (operation timeout 2 s, attempts of 1 s), let
 * go once the call failed with {@link KeyStoreException}. The server then runs the {@code PutItem}s
 * it had been sent, possibly after the guard's first release: the guard's take-back (a fenced
 * release repeated over the lease) frees the key all the same, and a retry sends.
 */
class DynamoDbStalledClaimTest {

  @Test
  void aClaimTimedOutWhileDynamoDbStalledDoesNotHoldItsKeyOnceItIsBack() throws Exception {
    try (Dynalite dynalite = new Dynalite(FreePorts.next())) {
      DynamoDbClient client =
          DynamoDbStores.client(
              URI.create("http://127.0.0.1:" + dynalite.port()),
              Duration.ofSeconds(1),
              Duration.ofSeconds(1));
      DynamoDbKeyStore store =
          DynamoDbKeyStore.builder(client)
              .tableName("idem_stalled")
              .createTableIfMissing(true)
              .operationTimeout(Duration.ofSeconds(2))
              .attemptTimeout(Duration.ofSeconds(1))
              .build();
      IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
      Poll.within(Duration.ofSeconds(60))
          .every(Duration.ofMillis(50))
          .ignoring(KeyStoreException.class)
          .until(
              "the table created and answering before the stall",
              () -> {
                guard.find("stalled-dynamodb:warm-up");
                return true;
              });
      String key = "stalled-dynamodb:" + System.nanoTime();
      AtomicInteger sends = new AtomicInteger();
      boolean resumed = false;
      try {
        dynalite.pause();
        assertThatThrownBy(() -> guard.execute(key, TTL, ctx -> "n_" + sends.incrementAndGet()))
            .isInstanceOf(KeyStoreException.class);
        assertThat(sends).as("nothing sent while the store stalled").hasValue(0);
        dynalite.resume();
        resumed = true;

        StalledClaims.assertTakenBackAndSentOnRetry(
            guard, key, sends, "the claim that timed out, nothing sent, once the store is back");
      } finally {
        if (!resumed) {
          dynalite.resume();
        }
        guard.close();
        client.close();
      }
    }
  }
}
