package dev.idempotency.dynamodb;

import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spi.StoredRecord;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.Callable;
import java.util.regex.Pattern;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;

/**
 * A {@link KeyStore} in Amazon DynamoDB, through the AWS SDK for Java 2.x.
 *
 * <pre>{@code
 * DynamoDbClient dynamo = DynamoDbClient.create();
 * DynamoDbKeyStore store = DynamoDbKeyStore.builder(dynamo)
 *     .tableName("idempotency")
 *     .build();
 * IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
 * }</pre>
 *
 * <p><b>Layout.</b> One item per key in a table whose partition key is a string ({@value
 * #DEFAULT_PARTITION_KEY} by default) holding the key prefix and the key's digest; the item holds
 * the state, owner token, attempt, fingerprint, result (binary) and times as epoch milliseconds,
 * and the end of the window in epoch seconds in the TTL attribute ({@value #DEFAULT_TTL_ATTRIBUTE}
 * by default), so that DynamoDB removes old items. TTL deletion lags (up to days), so every
 * condition checks the window itself: an item past its window counts as absent.
 *
 * <p><b>Requests.</b> A claim is one conditional {@code PutItem}; on a repeat, real DynamoDB
 * returns the existing item with the failed condition ({@code
 * ReturnValuesOnConditionCheckFailure}), and where it does not (emulators such as dynalite), one
 * consistent {@code GetItem} reads it. Complete, release and extend are one conditional {@code
 * UpdateItem} or {@code DeleteItem} each, fenced by the owner token and the window; a take-back of
 * a claim ({@link #takeBack}) is a consistent {@code GetItem} then a conditional {@code DeleteItem}
 * or {@code UpdateItem} (up to two more if a renewal moves the lease meanwhile). A first send
 * therefore costs two writes, a replay one failed conditional write (plus one read where the item
 * does not come back with it). Batches read their keys with {@code BatchGetItem} and write in
 * parallel on the store's own threads ({@link Builder#batchParallelism(int)}); DynamoDB's
 * transactions are not used.
 *
 * <p><b>Time.</b> DynamoDB has no server time in conditions, so leases and windows run on the
 * application's clock (the guard's): hosts whose clocks disagree by more than a lease can take over
 * each other's live claims. Keep clocks synchronised (NTP, the Amazon Time Sync Service) and leases
 * well above the skew; {@code docs/stores.md} says more.
 *
 * <p><b>Bounded time.</b> Every request carries the store's own timeouts and retries, whatever the
 * client was built with: at most {@link Builder#maxAttempts(int) 3 attempts} within an {@link
 * Builder#operationTimeout(Duration) operation timeout} of 2 s, each attempt at most {@link
 * Builder#attemptTimeout(Duration) 1 s}. Throttling, timeouts and an unreachable endpoint are
 * {@link dev.idempotency.KeyStoreException}s within that bound; the guard logs one WARN per outage,
 * and the same store works again once DynamoDB answers. A claim's {@code PutItem} given up on may
 * still be run by DynamoDB after that: the guard takes such a claim back in the background, a
 * delete fenced by its owner token, repeated over one lease. The store is built without a request
 * unless {@link Builder#createTableIfMissing(boolean)} is set.
 *
 * <p><b>Results.</b> A DynamoDB item holds at most 400 KB, so the store takes results of at most
 * {@value #DEFAULT_MAX_PAYLOAD_BYTES} bytes; the guard records a larger result as sent without a
 * stored result (repeats do not send and get a clear exception).
 *
 * <p>Thread-safe. {@link #close()} stops the store's batch threads, not the client, which stays the
 * application's.
 */
public final class DynamoDbKeyStore implements KeyStore, AutoCloseable {

  /** The default table name. */
  public static final String DEFAULT_TABLE_NAME = "idempotency";

  /** The default name of the table's partition key attribute (a string). */
  public static final String DEFAULT_PARTITION_KEY = "id";

  /** The default name of the TTL attribute (epoch seconds). */
  public static final String DEFAULT_TTL_ATTRIBUTE = "expiration";

  /** The default key prefix: none. */
  public static final String DEFAULT_KEY_PREFIX = "";

  /** The default bound on one store request, its retries included: 2 seconds. */
  public static final Duration DEFAULT_OPERATION_TIMEOUT = Duration.ofSeconds(2);

  /** The default bound on one attempt of a request: 1 second. */
  public static final Duration DEFAULT_ATTEMPT_TIMEOUT = Duration.ofSeconds(1);

  /** The default number of attempts of one request (the first and two retries). */
  public static final int DEFAULT_MAX_ATTEMPTS = 3;

  /** The default number of a batch's conditional writes in flight at once. */
  public static final int DEFAULT_BATCH_PARALLELISM = 16;

  /**
   * The default and largest result stored: 400,000 bytes, which leaves room in DynamoDB's 400 KB
   * item for the other attributes and a raw key of 1,024 characters.
   */
  public static final int DEFAULT_MAX_PAYLOAD_BYTES = 400_000;

  /** The default bound on the wait for a table being created to become active: 60 seconds. */
  public static final Duration DEFAULT_TABLE_WAIT = Duration.ofSeconds(60);

  private static final Pattern TABLE = Pattern.compile("[A-Za-z0-9_.\\-]{3,255}");
  private static final Pattern ATTRIBUTE = Pattern.compile("[A-Za-z0-9_]{1,64}");
  private static final Pattern PREFIX = Pattern.compile("[A-Za-z0-9_:.\\-]{0,64}");

  private final Requests requests;
  private final DynamoDbWrites writes;
  private final DynamoDbTakeBack takeBacks;
  private final DynamoDbClaims claims;
  private final Parallel parallel;
  private final int maxPayloadBytes;

  private DynamoDbKeyStore(Builder builder) {
    this.requests =
        new Requests(
            builder.client,
            builder.tableName,
            builder.operationTimeout,
            builder.attemptTimeout,
            builder.maxAttempts);
    Items items = new Items(builder.partitionKey, builder.ttlAttribute, builder.keyPrefix);
    this.parallel = new Parallel(builder.batchParallelism);
    this.writes = new DynamoDbWrites(requests, items);
    this.takeBacks = new DynamoDbTakeBack(writes);
    this.claims = new DynamoDbClaims(requests, items, writes, parallel);
    this.maxPayloadBytes = builder.maxPayloadBytes;
    if (builder.createTableIfMissing) {
      TableSetup.createIfMissing(requests, items, builder.tableWait);
    }
  }

  /**
   * Starts a builder on the application's client. The store never closes it.
   *
   * @param client the client, with the application's region, credentials and HTTP client
   * @return a new builder
   */
  public static Builder builder(DynamoDbClient client) {
    return new Builder(Objects.requireNonNull(client, "client must not be null"));
  }

  /**
   * Whether the table exists: one {@code DescribeTable}, for a start-up check or a health probe.
   *
   * @return {@code true} if it exists, {@code false} if DynamoDB says it does not
   * @throws dev.idempotency.KeyStoreException if DynamoDB could not be asked
   */
  public boolean tableExists() {
    return TableSetup.exists(requests);
  }

  /**
   * The table's name.
   *
   * @return the name
   */
  public String tableName() {
    return requests.table();
  }

  @Override
  public ClaimResult claim(ClaimRequest request) {
    return claims.claim(Objects.requireNonNull(request, "request"));
  }

  /** Claims a batch: consistent {@code BatchGetItem}s, then parallel conditional writes. */
  @Override
  public List<ClaimResult> claimAll(List<ClaimRequest> requests) {
    if (requests.isEmpty()) {
      return List.of();
    }
    return claims.claimAll(requests);
  }

  @Override
  public boolean complete(CompleteRequest request) {
    return writes.complete(checked(request));
  }

  /** Completes a batch with parallel conditional writes. */
  @Override
  public List<Boolean> completeAll(List<CompleteRequest> requests) {
    requests.forEach(this::checked);
    List<Callable<Boolean>> tasks = new ArrayList<>(requests.size());
    for (CompleteRequest request : requests) {
      tasks.add(() -> writes.complete(request));
    }
    return tasks.isEmpty() ? List.of() : parallel.runAll(tasks);
  }

  private CompleteRequest checked(CompleteRequest request) {
    Objects.requireNonNull(request, "request");
    return request.requirePayloadAtMost(maxPayloadBytes);
  }

  @Override
  public boolean release(String keyId, String ownerToken) {
    Objects.requireNonNull(keyId, "keyId");
    Objects.requireNonNull(ownerToken, "ownerToken");
    return writes.release(keyId, ownerToken);
  }

  /** Deletes a first attempt; a takeover keeps its attempt and its lease ends at {@code now}. */
  @Override
  public boolean takeBack(String keyId, String ownerToken, Instant now) {
    Objects.requireNonNull(keyId, "keyId");
    Objects.requireNonNull(ownerToken, "ownerToken");
    Objects.requireNonNull(now, "now");
    return takeBacks.takeBack(keyId, ownerToken, now);
  }

  @Override
  public boolean extend(ExtendRequest request) {
    return writes.extend(Objects.requireNonNull(request, "request"));
  }

  /** Renews a batch of leases with parallel conditional writes, each fenced by its token. */
  @Override
  public List<Boolean> extendAll(List<ExtendRequest> requests) {
    List<Callable<Boolean>> tasks = new ArrayList<>(requests.size());
    for (ExtendRequest request : requests) {
      tasks.add(() -> writes.extend(request));
    }
    return tasks.isEmpty() ? List.of() : parallel.runAll(tasks);
  }

  @Override
  public Optional<StoredRecord> find(String keyId, Instant now) {
    return writes.find(Objects.requireNonNull(keyId, "keyId"), Objects.requireNonNull(now, "now"));
  }

  @Override
  public boolean delete(String keyId, Instant now) {
    return writes.delete(
        Objects.requireNonNull(keyId, "keyId"), Objects.requireNonNull(now, "now"));
  }

  @Override
  public int maxPayloadBytes() {
    return maxPayloadBytes;
  }

  /**
   * {@inheritDoc}
   *
   * @return {@code dynamodb}
   */
  @Override
  public String kind() {
    return "dynamodb";
  }

  /** Stops the store's batch threads; the client stays open (it is the application's). */
  @Override
  public void close() {
    parallel.close();
  }

  /** Builds a {@link DynamoDbKeyStore}; every method validates its argument at once. */
  public static final class Builder {

    private final DynamoDbClient client;
    private String tableName = DEFAULT_TABLE_NAME;
    private boolean createTableIfMissing;
    private String partitionKey = DEFAULT_PARTITION_KEY;
    private String ttlAttribute = DEFAULT_TTL_ATTRIBUTE;
    private String keyPrefix = DEFAULT_KEY_PREFIX;
    private Duration operationTimeout = DEFAULT_OPERATION_TIMEOUT;
    private Duration attemptTimeout = DEFAULT_ATTEMPT_TIMEOUT;
    private int maxAttempts = DEFAULT_MAX_ATTEMPTS;
    private int batchParallelism = DEFAULT_BATCH_PARALLELISM;
    private int maxPayloadBytes = DEFAULT_MAX_PAYLOAD_BYTES;
    private Duration tableWait = DEFAULT_TABLE_WAIT;

    private Builder(DynamoDbClient client) {
      this.client = client;
    }

    /**
     * The table; default {@value DynamoDbKeyStore#DEFAULT_TABLE_NAME}.
     *
     * @param tableName 3 to 255 characters of {@code [A-Za-z0-9_.-]}, as DynamoDB requires
     * @return this builder
     */
    public Builder tableName(String tableName) {
      Objects.requireNonNull(tableName, "tableName must not be null");
      if (!TABLE.matcher(tableName).matches()) {
        throw new IllegalArgumentException(
            "tableName must be 3 to 255 characters of [A-Za-z0-9_.-], was '" + tableName + "'");
      }
      this.tableName = tableName;
      return this;
    }

    /**
     * Whether {@link #build()} creates the table (on-demand capacity) and turns on its TTL when it
     * is missing, waiting until it is active; default {@code false}: the table is created by your
     * infrastructure code ({@code docs/stores.md} has it for the CLI, CloudFormation and Terraform)
     * and the store makes no request until it is used.
     *
     * @param createTableIfMissing whether to create the table
     * @return this builder
     */
    public Builder createTableIfMissing(boolean createTableIfMissing) {
      this.createTableIfMissing = createTableIfMissing;
      return this;
    }

    /**
     * The name of the table's partition key attribute (type string); default {@value
     * DynamoDbKeyStore#DEFAULT_PARTITION_KEY}.
     *
     * @param partitionKey 1 to 64 characters of {@code [A-Za-z0-9_]}
     * @return this builder
     */
    public Builder partitionKey(String partitionKey) {
      this.partitionKey = attribute(partitionKey, "partitionKey");
      return this;
    }

    /**
     * The name of the attribute DynamoDB's TTL is set on (epoch seconds); default {@value
     * DynamoDbKeyStore#DEFAULT_TTL_ATTRIBUTE}.
     *
     * @param ttlAttribute 1 to 64 characters of {@code [A-Za-z0-9_]}
     * @return this builder
     */
    public Builder ttlAttribute(String ttlAttribute) {
      this.ttlAttribute = attribute(ttlAttribute, "ttlAttribute");
      return this;
    }

    private static String attribute(String name, String what) {
      Objects.requireNonNull(name, what + " must not be null");
      if (!ATTRIBUTE.matcher(name).matches()) {
        throw new IllegalArgumentException(
            what + " must be 1 to 64 characters of [A-Za-z0-9_], was '" + name + "'");
      }
      return name;
    }

    /**
     * A prefix before every key's digest in the partition key, for a table shared with other items;
     * default none.
     *
     * @param keyPrefix up to 64 characters of {@code [A-Za-z0-9_:.-]}
     * @return this builder
     */
    public Builder keyPrefix(String keyPrefix) {
      Objects.requireNonNull(keyPrefix, "keyPrefix must not be null");
      if (!PREFIX.matcher(keyPrefix).matches()) {
        throw new IllegalArgumentException(
            "keyPrefix must be up to 64 characters of [A-Za-z0-9_:.-], was '" + keyPrefix + "'");
      }
      this.keyPrefix = keyPrefix;
      return this;
    }

    /**
     * The bound on one request to DynamoDB, its retries included (the SDK's {@code apiCallTimeout},
     * set on every request); default 2 seconds.
     *
     * @param operationTimeout positive
     * @return this builder
     */
    public Builder operationTimeout(Duration operationTimeout) {
      this.operationTimeout = positive(operationTimeout, "operationTimeout");
      return this;
    }

    /**
     * The bound on one attempt of a request (the SDK's {@code apiCallAttemptTimeout}); default 1
     * second.
     *
     * @param attemptTimeout positive
     * @return this builder
     */
    public Builder attemptTimeout(Duration attemptTimeout) {
      this.attemptTimeout = positive(attemptTimeout, "attemptTimeout");
      return this;
    }

    private static Duration positive(Duration duration, String what) {
      Objects.requireNonNull(duration, what + " must not be null");
      if (duration.isNegative() || duration.isZero()) {
        throw new IllegalArgumentException(what + " must be positive, was " + duration);
      }
      return duration;
    }

    /**
     * How many attempts one request gets, within the operation timeout; default 3. Retries follow
     * the SDK's standard retry strategy with the store's backoff: 25 ms doubling up to 250 ms, and
     * after throttling 100 ms doubling up to 500 ms, with jitter.
     *
     * @param maxAttempts 1 (no retry) to 10
     * @return this builder
     */
    public Builder maxAttempts(int maxAttempts) {
      if (maxAttempts < 1 || maxAttempts > 10) {
        throw new IllegalArgumentException("maxAttempts must be 1 to 10, was " + maxAttempts);
      }
      this.maxAttempts = maxAttempts;
      return this;
    }

    /**
     * How many of a batch's conditional writes are in flight at once, on the store's own daemon
     * threads; default 16.
     *
     * @param batchParallelism 1 to 256
     * @return this builder
     */
    public Builder batchParallelism(int batchParallelism) {
      if (batchParallelism < 1 || batchParallelism > 256) {
        throw new IllegalArgumentException(
            "batchParallelism must be 1 to 256, was " + batchParallelism);
      }
      this.batchParallelism = batchParallelism;
      return this;
    }

    /**
     * The largest result stored; default and maximum {@value
     * DynamoDbKeyStore#DEFAULT_MAX_PAYLOAD_BYTES} bytes (DynamoDB's item limit). The guard records
     * a larger result as sent without a stored result.
     *
     * @param maxPayloadBytes 1 to {@value DynamoDbKeyStore#DEFAULT_MAX_PAYLOAD_BYTES}
     * @return this builder
     */
    public Builder maxPayloadBytes(int maxPayloadBytes) {
      if (maxPayloadBytes < 1 || maxPayloadBytes > DEFAULT_MAX_PAYLOAD_BYTES) {
        throw new IllegalArgumentException(
            "maxPayloadBytes must be 1 to "
                + DEFAULT_MAX_PAYLOAD_BYTES
                + " (DynamoDB's item limit), was "
                + maxPayloadBytes);
      }
      this.maxPayloadBytes = maxPayloadBytes;
      return this;
    }

    /**
     * How long {@link #build()} waits for a table it created to become active; default 60 seconds.
     *
     * @param tableWait positive
     * @return this builder
     */
    public Builder tableWait(Duration tableWait) {
      this.tableWait = positive(tableWait, "tableWait");
      return this;
    }

    /**
     * Builds the store; with {@link #createTableIfMissing(boolean)} it first creates the table if
     * it is missing.
     *
     * @return the store
     * @throws IllegalArgumentException if the attempt timeout is longer than the operation timeout
     * @throws dev.idempotency.KeyStoreException if the table was to be created and could not be
     */
    public DynamoDbKeyStore build() {
      if (attemptTimeout.compareTo(operationTimeout) > 0) {
        throw new IllegalArgumentException(
            "attemptTimeout ("
                + attemptTimeout
                + ") must not be longer than operationTimeout ("
                + operationTimeout
                + ")");
      }
      return new DynamoDbKeyStore(this);
    }
  }
}
