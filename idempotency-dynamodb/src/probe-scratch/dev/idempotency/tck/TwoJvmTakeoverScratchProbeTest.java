package dev.idempotency.tck;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.dynamodb.DynamoDbKeyStore;
import dev.idempotency.dynamodb.DynamoDbStoreFactory;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.RecordState;
import dev.idempotency.testservers.Dynalite;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.http.urlconnection.UrlConnectionHttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;

/** Scratch probe: two JVMs race for keys whose lease lapsed or whose window ended. */
class TwoJvmTakeoverScratchProbeTest {

  private static final int KEYS = 300;
  private static final int THREADS = 4;
  private static final String TABLE = "idempotency-probe-2jvm";

  @Test
  void twoProcessesTakeOverEachLapsedOrExpiredKeyOnce(@TempDir Path dir) throws Exception {
    Dynalite dynalite = Dynalite.shared();
    DynamoDbClient client =
        DynamoDbClient.builder()
            .endpointOverride(dynalite.endpoint())
            .region(Region.US_EAST_1)
            .credentialsProvider(
                StaticCredentialsProvider.create(AwsBasicCredentials.create("test", "test")))
            .httpClient(UrlConnectionHttpClient.builder().build())
            .build();
    DynamoDbKeyStore seeder =
        DynamoDbKeyStore.builder(client)
            .tableName(TABLE)
            .operationTimeout(Duration.ofSeconds(15))
            .attemptTimeout(Duration.ofSeconds(15))
            .createTableIfMissing(true)
            .build();
    List<String> keyIds = new ArrayList<>();
    Instant now = Instant.now();
    for (int i = 0; i < KEYS; i++) {
      String keyId = "k" + i + "x" + UUID.randomUUID().toString().replace("-", "");
      keyIds.add(keyId);
      if (i % 2 == 0) { // lease (10 min) lapsed, window (1 h) live
        seeder.claim(
            new ClaimRequest(
                keyId,
                "old",
                "",
                now.minus(Duration.ofMinutes(15)),
                Duration.ofMinutes(10),
                Duration.ofHours(1),
                true,
                null));
      } else { // completed, window ended
        Instant then = now.minus(Duration.ofHours(2));
        seeder.claim(
            new ClaimRequest(
                keyId, "old", "", then, Duration.ofMinutes(10), Duration.ofHours(1), true, null));
        seeder.complete(
            new CompleteRequest(keyId, "old", RecordState.COMPLETED, new byte[] {1}, then));
      }
    }
    String config = dynalite.endpoint() + "|" + TABLE;
    Path keysFile = dir.resolve("keys.txt");
    Path resultFile = dir.resolve("child-result.txt");
    Files.write(keysFile, keyIds, StandardCharsets.UTF_8);
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    Process child =
        new ProcessBuilder(
                java,
                "-cp",
                System.getProperty("java.class.path"),
                KeyStoreRaceMain.class.getName(),
                DynamoDbStoreFactory.class.getName(),
                config,
                keysFile.toString(),
                Integer.toString(THREADS),
                resultFile.toString())
            .redirectError(dir.resolve("child-stderr.txt").toFile())
            .start();
    try {
      BufferedReader childOut =
          new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8));
      CompletableFuture<String> ready =
          CompletableFuture.supplyAsync(
              () -> {
                try {
                  return childOut.readLine();
                } catch (java.io.IOException e) {
                  throw new java.io.UncheckedIOException(e);
                }
              });
      assertThat(ready.get(180, TimeUnit.SECONDS)).isEqualTo("READY");
      KeyStoreRace race =
          new KeyStoreRace(new DynamoDbStoreFactory().open(config), keyIds, THREADS, true);
      race.warmUp();
      Writer childIn = new OutputStreamWriter(child.getOutputStream(), StandardCharsets.UTF_8);
      childIn.write("GO\n");
      childIn.flush();
      KeyStoreRace.Result parent = race.run();
      assertThat(child.waitFor(5, TimeUnit.MINUTES)).isTrue();
      assertThat(child.exitValue()).as(Files.readString(dir.resolve("child-stderr.txt"))).isZero();
      Set<String> childWon = new HashSet<>();
      for (String line : Files.readAllLines(resultFile, StandardCharsets.UTF_8)) {
        if (line.startsWith("WON ")) {
          childWon.add(line.substring(4));
        }
      }
      Set<String> both = new HashSet<>(parent.won());
      both.retainAll(childWon);
      assertThat(both).as("keys won by both processes").isEmpty();
      Set<String> all = new HashSet<>(parent.won());
      all.addAll(childWon);
      assertThat(all)
          .as("parent won %d, child %d", parent.won().size(), childWon.size())
          .containsExactlyInAnyOrderElementsOf(keyIds);
      // sanity: a key once taken over is not claimable again
      assertThat(
              seeder.claim(
                  new ClaimRequest(
                      keyIds.get(0),
                      "late",
                      "",
                      Instant.now(),
                      Duration.ofMinutes(10),
                      Duration.ofHours(1),
                      true,
                      null)))
          .isInstanceOf(ClaimResult.Existing.class);
    } finally {
      child.destroyForcibly();
      seeder.close();
      client.close();
    }
  }
}
