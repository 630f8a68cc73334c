package dev.idempotency.reliability;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRecord;
import dev.idempotency.KeyStoreException;
import dev.idempotency.dynamodb.DynamoDbKeyStore;
import dev.idempotency.testservers.Dynalite;
import dev.idempotency.testservers.FreePorts;
import java.lang.reflect.Field;
import java.net.URI;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.http.urlconnection.UrlConnectionHttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;

/**
 * Issue 37 (found by probeA): {@link RedisStalledClaimTest}'s case on DynamoDB (dynalite): the
 * server stopped with SIGSTOP while a claim is sent (operation timeout 2 s, attempts of 1 s), let
 * go once the call failed with {@link KeyStoreException}. The server then runs the {@code PutItem}s
 * it had been sent, possibly after the guard's first release: the guard's take-back (a fenced
 * release repeated over the lease) frees the key all the same, and a retry sends.
 */
class DynamoDbStalledClaimTest {

  static final Duration TTL = Duration.ofHours(1);

  @Test
  void aClaimTimedOutWhileDynamoDbStalledDoesNotHoldItsKeyOnceItIsBack() throws Exception {
    try (Dynalite dynalite = new Dynalite(FreePorts.next())) {
      DynamoDbClient client =
          DynamoDbClient.builder()
              .endpointOverride(URI.create("http://127.0.0.1:" + dynalite.port()))
              .region(Region.US_EAST_1)
              .credentialsProvider(
                  StaticCredentialsProvider.create(AwsBasicCredentials.create("test", "test")))
              .httpClient(
                  UrlConnectionHttpClient.builder()
                      .connectionTimeout(Duration.ofSeconds(1))
                      .socketTimeout(Duration.ofSeconds(1))
                      .build())
              .build();
      DynamoDbKeyStore store =
          DynamoDbKeyStore.builder(client)
              .tableName("idem_stalled")
              .createTableIfMissing(true)
              .operationTimeout(Duration.ofSeconds(2))
              .attemptTimeout(Duration.ofSeconds(1))
              .build();
      IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
      // the table is created and answers before the stall (bounded polling)
      long ready = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      while (true) {
        try {
          guard.find("stalled-dynamodb:warm-up");
          break;
        } catch (KeyStoreException notYet) {
          if (System.nanoTime() > ready) {
            throw notYet;
          }
          Thread.sleep(50);
        }
      }
      String key = "stalled-dynamodb:" + System.nanoTime();
      AtomicInteger sends = new AtomicInteger();
      Process node = process(dynalite);
      boolean resumed = false;
      try {
        signal("STOP", node);
        assertThatThrownBy(() -> guard.execute(key, TTL, ctx -> "n_" + sends.incrementAndGet()))
            .isInstanceOf(KeyStoreException.class);
        assertThat(sends).as("nothing sent while the store stalled").hasValue(0);
        signal("CONT", node);
        resumed = true;

        // bounded polling, well within the 30 s lease the stray claim would hold the key
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        Optional<IdempotencyRecord> record = null; // null until the store answered
        KeyStoreException last = null;
        while (System.nanoTime() < deadline) {
          try {
            record = guard.find(key);
            if (record.isEmpty()) {
              break;
            }
          } catch (KeyStoreException stillRefused) {
            last = stillRefused;
          }
          Thread.sleep(20);
        }
        assertThat(record)
            .as("the claim that timed out, nothing sent, once the store is back (last: %s)", last)
            .isEmpty();
        assertThat(guard.execute(key, TTL, ctx -> "n_" + sends.incrementAndGet()))
            .as("a retry sends")
            .isEqualTo("n_1");
      } finally {
        if (!resumed) {
          signal("CONT", node);
        }
        guard.close();
        client.close();
      }
    }
  }

  private static Process process(Dynalite dynalite) throws Exception {
    Field field = Dynalite.class.getDeclaredField("process");
    field.setAccessible(true);
    return (Process) field.get(dynalite);
  }

  private static void signal(String name, Process process) throws Exception {
    Process kill = new ProcessBuilder("kill", "-" + name, Long.toString(process.pid())).start();
    if (!kill.waitFor(30, TimeUnit.SECONDS) || kill.exitValue() != 0) {
      throw new IllegalStateException("kill -" + name + " failed");
    }
  }
}
