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
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.http.urlconnection.UrlConnectionHttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;

/**
 * Probe (probeA): {@link RedisStalledClaimProbeTest}'s case on DynamoDB (dynalite): the server
 * stopped with SIGSTOP while a claim is sent (operation timeout 2 s, attempts of 1 s), let go once
 * the call failed with {@link KeyStoreException}. Once the store answers again, is the key free
 * (nothing was sent), or held by the claim the server ran late? Tagged open-finding: a probe.
 */
@Tag("open-finding")
class DynamoDbStalledClaimProbeTest {

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

        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        Optional<IdempotencyRecord> record;
        while (true) {
          try {
            record = guard.find(key);
            break;
          } catch (KeyStoreException stillRefused) {
            if (System.nanoTime() > deadline) {
              throw new AssertionError("the store did not answer again", stillRefused);
            }
            Thread.sleep(20);
          }
        }
        assertThat(record)
            .as("the record of a claim that timed out, nothing sent, once the store answers again")
            .isEmpty();
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
