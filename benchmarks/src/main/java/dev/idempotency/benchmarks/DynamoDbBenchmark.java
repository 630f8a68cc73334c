package dev.idempotency.benchmarks;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.dynamodb.DynamoDbKeyStore;
import dev.idempotency.testservers.Dynalite;
import java.util.HashMap;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.core.SdkBytes;
import software.amazon.awssdk.http.urlconnection.UrlConnectionHttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;
import software.amazon.awssdk.services.dynamodb.model.AttributeValue;
import software.amazon.awssdk.services.dynamodb.model.ConditionalCheckFailedException;
import software.amazon.awssdk.services.dynamodb.model.ReturnValuesOnConditionCheckFailure;

/**
 * The DynamoDB store through the guard beside its floor, on dynalite (a DynamoDB API on LevelDB in
 * Node.js, started on loopback): {@code firstSend} and {@code replay} are {@link GuardBenchmark}'s;
 * the floor issues the store's own requests directly with the same SDK client, without the guard
 * and without the store's per-request timeouts and retries: a conditional {@code PutItem} of the
 * same attributes, then the owner-fenced {@code UpdateItem} with the result; a replay is the
 * refused {@code PutItem} and the consistent {@code GetItem} that the store sends on dynalite,
 * which returns no item with a failed condition.
 *
 * <p>dynalite's speed is not DynamoDB's: it is one Node.js process sharing the two cores with the
 * client, so these figures compare the guard with its floor on the same server, nothing more.
 *
 * <pre>
 * java -jar benchmarks/target/benchmarks.jar DynamoDbBenchmark -t 1 -bm sample -tu us
 * java -jar benchmarks/target/benchmarks.jar DynamoDbBenchmark -t 16 -bm thrpt -tu s
 * </pre>
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
// The JDK HTTP client keeps 5 idle connections per host unless told otherwise; 16 threads need 16.
@Fork(value = 1, jvmArgsAppend = "-Dhttp.maxConnections=64")
@Warmup(iterations = 2, time = 3)
@Measurement(iterations = 3, time = 5)
public class DynamoDbBenchmark {

  private static final String TABLE = "bench-idempotency";
  private static final String PARTITION_KEY = DynamoDbKeyStore.DEFAULT_PARTITION_KEY;
  private static final String CLAIM_CONDITION =
      "attribute_not_exists(#pk) OR #retain_until <= :now";
  private static final String COMPLETE_CONDITION =
      "#owner = :owner AND #state = :in_progress AND #retain_until > :now";

  /** dynalite, one SDK client, the store on it, and the replay keys of both sides. */
  @State(Scope.Benchmark)
  public static class Server {
    Dynalite dynalite;
    DynamoDbClient client;
    DynamoDbKeyStore store;
    IdempotencyGuard guard;
    final String[] replayKeys = new String[GuardBenchmark.REPLAY_KEYS];
    final String[] floorReplayKeys = new String[GuardBenchmark.REPLAY_KEYS];

    @Setup(Level.Trial)
    public void start() throws Exception {
      dynalite = new Dynalite();
      client =
          DynamoDbClient.builder()
              .endpointOverride(dynalite.endpoint())
              .region(Region.US_EAST_1)
              .credentialsProvider(
                  StaticCredentialsProvider.create(AwsBasicCredentials.create("bench", "bench")))
              .httpClient(UrlConnectionHttpClient.builder().build())
              .build();
      store = DynamoDbKeyStore.builder(client).tableName(TABLE).createTableIfMissing(true).build();
      guard = IdempotencyGuard.builder().store(store).build();
      String run = UUID.randomUUID().toString().substring(0, 8);
      for (int i = 0; i < replayKeys.length; i++) {
        replayKeys[i] = "replay:" + run + ":" + i;
        guard.execute(replayKeys[i], Backend.TTL, GuardBenchmark.NO_OP);
        floorReplayKeys[i] = "floor-replay:" + run + ":" + i;
        floorFirstSend(this, floorReplayKeys[i]);
      }
    }

    @TearDown(Level.Trial)
    public void stop() {
      guard.close();
      store.close();
      client.close();
      dynalite.close();
    }
  }

  @Benchmark
  public String firstSend(Server s, GuardBenchmark.Keys k) {
    return s.guard.execute(k.newKey(), Backend.TTL, GuardBenchmark.NO_OP);
  }

  @Benchmark
  public String replay(Server s, GuardBenchmark.Keys k) {
    return s.guard.execute(s.replayKeys[k.replayIndex()], Backend.TTL, GuardBenchmark.NO_OP);
  }

  @Benchmark
  public boolean floorFirstSend(Server s, GuardBenchmark.Keys k) {
    return floorFirstSend(s, "floor:" + k.newKey());
  }

  /** The refused claim, then the consistent read of the item that refused it. */
  @Benchmark
  public Map<String, AttributeValue> floorReplay(Server s, GuardBenchmark.Keys k) {
    String key = s.floorReplayKeys[k.replayIndex()];
    long now = System.currentTimeMillis();
    try {
      claim(s, key, Long.toHexString(ThreadLocalRandom.current().nextLong()), now);
      throw new IllegalStateException("a replay key was claimed again: " + key);
    } catch (ConditionalCheckFailedException e) {
      return s.client
          .getItem(
              get ->
                  get.tableName(TABLE)
                      .key(Map.of(PARTITION_KEY, AttributeValue.fromS(key)))
                      .consistentRead(true))
          .item();
    }
  }

  /** The conditional put of a new in-progress item, then the fenced update with the result. */
  static boolean floorFirstSend(Server s, String key) {
    long now = System.currentTimeMillis();
    String owner = Long.toHexString(ThreadLocalRandom.current().nextLong());
    try {
      claim(s, key, owner, now);
    } catch (ConditionalCheckFailedException e) {
      return false;
    }
    Map<String, String> names = new HashMap<>();
    names.put("#owner", "owner");
    names.put("#state", "state");
    names.put("#completed_at", "completed_at");
    names.put("#retain_until", "retain_until");
    names.put("#result", "result");
    Map<String, AttributeValue> values = new HashMap<>();
    values.put(":owner", AttributeValue.fromS(owner));
    values.put(":in_progress", AttributeValue.fromS("IN_PROGRESS"));
    values.put(":state", AttributeValue.fromS("COMPLETED"));
    values.put(":now", number(now));
    values.put(":result", AttributeValue.fromB(SdkBytes.fromByteArray(Backend.RESULT)));
    s.client.updateItem(
        update ->
            update
                .tableName(TABLE)
                .key(Map.of(PARTITION_KEY, AttributeValue.fromS(key)))
                .updateExpression("SET #state = :state, #completed_at = :now, #result = :result")
                .conditionExpression(COMPLETE_CONDITION)
                .expressionAttributeNames(names)
                .expressionAttributeValues(values)
                .returnValuesOnConditionCheckFailure(ReturnValuesOnConditionCheckFailure.ALL_OLD));
    return true;
  }

  /** The store's claim: the same attributes, condition and return values. */
  private static void claim(Server s, String key, String owner, long now) {
    long retain = now + Backend.TTL.toMillis();
    Map<String, AttributeValue> item = new HashMap<>();
    item.put(PARTITION_KEY, AttributeValue.fromS(key));
    item.put("state", AttributeValue.fromS("IN_PROGRESS"));
    item.put("owner", AttributeValue.fromS(owner));
    item.put("attempt", number(1));
    item.put("created_at", number(now));
    item.put("lease_until", number(now + 30_000));
    item.put("retain_until", number(retain));
    item.put(DynamoDbKeyStore.DEFAULT_TTL_ATTRIBUTE, number((retain + 999) / 1000));
    s.client.putItem(
        put ->
            put.tableName(TABLE)
                .item(item)
                .conditionExpression(CLAIM_CONDITION)
                .expressionAttributeNames(
                    Map.of("#pk", PARTITION_KEY, "#retain_until", "retain_until"))
                .expressionAttributeValues(Map.of(":now", number(now)))
                .returnValuesOnConditionCheckFailure(ReturnValuesOnConditionCheckFailure.ALL_OLD));
  }

  private static AttributeValue number(long value) {
    return AttributeValue.fromN(Long.toString(value));
  }
}
