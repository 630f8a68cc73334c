package dev.idempotency.spring.autoconfigure;

import dev.idempotency.TakeoverPolicy;
import java.time.Duration;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.util.unit.DataSize;

/**
 * The {@code idempotency.*} settings of the Spring Boot starter. Durations take Boot's formats
 * ({@code PT24H}, {@code 24h}).
 */
@ConfigurationProperties("idempotency")
public class IdempotencyProperties {

  /**
   * The store of records: auto (JDBC on the application's DataSource if it has one, else Redis on
   * its Lettuce connection, else DynamoDB on its DynamoDbClient, else in memory), memory, jdbc,
   * redis or dynamodb. A KeyStore bean wins over all.
   */
  private StoreType store = StoreType.AUTO;

  /**
   * How long a claim holds without renewal, so how long a crashed process blocks its keys; the
   * lease of a running send is renewed in the background.
   */
  private Duration lease = Duration.ofSeconds(30);

  /** How long a repeat waits for an in-flight first call before it is refused (409). */
  private Duration inFlightWait = Duration.ofSeconds(2);

  /** The window of @Idempotent methods and endpoints that name none. */
  private Duration defaultTtl = Duration.ofHours(24);

  /**
   * Whether to send anyway when the store fails before the claim (a duplicate becomes possible).
   */
  private boolean failOpen;

  /** What to do with a claim that outlived its lease: take-over (send again) or refuse (strict). */
  private TakeoverPolicy takeoverPolicy = TakeoverPolicy.TAKE_OVER;

  /** Whether leases are renewed while senders run. */
  private boolean leaseRenewal = true;

  /**
   * How long the guard lets running calls finish when the application stops, their leases renewed
   * and their outcomes recorded, before it abandons the rest as a crash would.
   */
  private Duration closeGracePeriod = Duration.ofSeconds(30);

  /**
   * How many outcomes, at most, the guard goes on writing in the background after a call's own
   * attempts to record them failed (the store was briefly unreachable); 0 never writes later.
   */
  private int maxPendingOutcomes = 10000;

  /**
   * Settings of single operations, by operation name (the {@code name} of {@code @Idempotent},
   * {@code @IdempotentEndpoint} or {@code @IdempotentListener}; for a direct guard call, the
   * request's operation, by default the key's namespace): {@code
   * idempotency.operations.otp.ttl=10m}, {@code idempotency.operations.marketing.fail-open=true}.
   */
  private final java.util.Map<String, Operation> operations = new java.util.LinkedHashMap<>();

  private final Memory memory = new Memory();
  private final Jdbc jdbc = new Jdbc();
  private final Redis redis = new Redis();
  private final DynamoDb dynamodb = new DynamoDb();
  private final Http http = new Http();

  /**
   * The store.
   *
   * @return the store type
   */
  public StoreType getStore() {
    return store;
  }

  /**
   * Sets the store.
   *
   * @param store the store type
   */
  public void setStore(StoreType store) {
    this.store = store;
  }

  /**
   * The lease.
   *
   * @return the lease
   */
  public Duration getLease() {
    return lease;
  }

  /**
   * Sets the lease.
   *
   * @param lease the lease
   */
  public void setLease(Duration lease) {
    this.lease = lease;
  }

  /**
   * The in-flight wait.
   *
   * @return the wait
   */
  public Duration getInFlightWait() {
    return inFlightWait;
  }

  /**
   * Sets the in-flight wait.
   *
   * @param inFlightWait the wait
   */
  public void setInFlightWait(Duration inFlightWait) {
    this.inFlightWait = inFlightWait;
  }

  /**
   * The default window.
   *
   * @return the ttl
   */
  public Duration getDefaultTtl() {
    return defaultTtl;
  }

  /**
   * Sets the default window.
   *
   * @param defaultTtl the ttl
   */
  public void setDefaultTtl(Duration defaultTtl) {
    this.defaultTtl = defaultTtl;
  }

  /**
   * Whether to fail open.
   *
   * @return {@code true} to send when the store fails
   */
  public boolean isFailOpen() {
    return failOpen;
  }

  /**
   * Sets fail-open.
   *
   * @param failOpen {@code true} to send when the store fails
   */
  public void setFailOpen(boolean failOpen) {
    this.failOpen = failOpen;
  }

  /**
   * The takeover policy.
   *
   * @return the policy
   */
  public TakeoverPolicy getTakeoverPolicy() {
    return takeoverPolicy;
  }

  /**
   * Sets the takeover policy.
   *
   * @param takeoverPolicy the policy
   */
  public void setTakeoverPolicy(TakeoverPolicy takeoverPolicy) {
    this.takeoverPolicy = takeoverPolicy;
  }

  /**
   * Whether leases are renewed.
   *
   * @return {@code true} to renew
   */
  public boolean isLeaseRenewal() {
    return leaseRenewal;
  }

  /**
   * Sets lease renewal.
   *
   * @param leaseRenewal {@code true} to renew
   */
  public void setLeaseRenewal(boolean leaseRenewal) {
    this.leaseRenewal = leaseRenewal;
  }

  /**
   * How long closing the guard lets running calls finish.
   *
   * @return the grace period
   */
  public Duration getCloseGracePeriod() {
    return closeGracePeriod;
  }

  /**
   * Sets how long closing the guard lets running calls finish.
   *
   * @param closeGracePeriod zero or positive
   */
  public void setCloseGracePeriod(Duration closeGracePeriod) {
    this.closeGracePeriod = closeGracePeriod;
  }

  /**
   * How many outcomes the guard goes on writing in the background, at most.
   *
   * @return the cap
   */
  public int getMaxPendingOutcomes() {
    return maxPendingOutcomes;
  }

  /**
   * Sets how many outcomes the guard goes on writing in the background, at most.
   *
   * @param maxPendingOutcomes zero (never write later) or more
   */
  public void setMaxPendingOutcomes(int maxPendingOutcomes) {
    this.maxPendingOutcomes = maxPendingOutcomes;
  }

  /**
   * The in-memory store's settings.
   *
   * @return the settings
   */
  /**
   * Settings of single operations, by name.
   *
   * @return the operations, mutable for binding
   */
  public java.util.Map<String, Operation> getOperations() {
    return operations;
  }

  /**
   * The window of an operation that names none itself: its {@code
   * idempotency.operations.<name>.ttl} if set, else {@link #getDefaultTtl()}.
   *
   * @param operation the operation's name, or {@code null} for none
   * @return the window
   */
  public Duration ttlOf(@Nullable String operation) {
    Operation own = operation == null ? null : operations.get(operation);
    return own != null && own.getTtl() != null ? own.getTtl() : defaultTtl;
  }

  /**
   * The in-memory store's settings.
   *
   * @return the settings
   */
  public Memory getMemory() {
    return memory;
  }

  /**
   * The JDBC store's settings.
   *
   * @return the settings
   */
  public Jdbc getJdbc() {
    return jdbc;
  }

  /**
   * The Redis store's settings.
   *
   * @return the settings
   */
  public Redis getRedis() {
    return redis;
  }

  /**
   * The DynamoDB store's settings.
   *
   * @return the settings
   */
  public DynamoDb getDynamodb() {
    return dynamodb;
  }

  /**
   * The HTTP settings of {@code @IdempotentEndpoint}.
   *
   * @return the settings
   */
  public Http getHttp() {
    return http;
  }

  /** Which store to use. */
  public enum StoreType {
    /**
     * JDBC if there is a DataSource, else Redis if there is Lettuce, else DynamoDB if there is a
     * DynamoDbClient, else in memory.
     */
    AUTO,
    /** In this JVM's memory: one instance only. */
    MEMORY,
    /** The application's DataSource. */
    JDBC,
    /** The application's Redis, through Lettuce. */
    REDIS,
    /** The application's DynamoDB, through its AWS SDK {@code DynamoDbClient} bean. */
    DYNAMODB
  }

  /** When to create the JDBC store's table. */
  public enum SchemaInitialization {
    /** Only on an embedded, in-memory database (H2, HSQLDB, Derby). */
    EMBEDDED,
    /** Always, if it does not exist. */
    ALWAYS,
    /** Never: apply the shipped DDL with your migrations. */
    NEVER
  }

  /** Settings of one operation; what is not set here comes from the application-wide ones. */
  public static class Operation {

    /**
     * The window of this operation's calls that name none themselves; default {@code default-ttl}.
     */
    private Duration ttl;

    /**
     * Whether this operation's calls send anyway when the store fails before the claim; default
     * {@code idempotency.fail-open}.
     */
    private Boolean failOpen;

    /**
     * The ttl.
     *
     * @return the ttl
     */
    public Duration getTtl() {
      return ttl;
    }

    /**
     * Sets the ttl.
     *
     * @param ttl the ttl
     */
    public void setTtl(Duration ttl) {
      this.ttl = ttl;
    }

    /**
     * The fail open.
     *
     * @return the fail open
     */
    public Boolean getFailOpen() {
      return failOpen;
    }

    /**
     * Sets the fail open.
     *
     * @param failOpen the fail open
     */
    public void setFailOpen(Boolean failOpen) {
      this.failOpen = failOpen;
    }
  }

  /** The in-memory store's settings. */
  public static class Memory {

    /** The most records kept: at least the keys one window holds. */
    private long maximumSize = 100_000;

    /**
     * The most records.
     *
     * @return the size
     */
    public long getMaximumSize() {
      return maximumSize;
    }

    /**
     * Sets the most records.
     *
     * @param maximumSize the size
     */
    public void setMaximumSize(long maximumSize) {
      this.maximumSize = maximumSize;
    }
  }

  /** The JDBC store's settings. */
  public static class Jdbc {

    /** The table, a plain identifier, optionally schema-qualified. */
    private String tableName = "idempotency_records";

    /** When to create the table: embedded (only on an in-memory database), always or never. */
    private SchemaInitialization initializeSchema = SchemaInitialization.EMBEDDED;

    /**
     * Whether leases and windows use the database's clock, so that instances with skewed clocks
     * agree.
     */
    private boolean databaseTime = true;

    /** The most one store operation may take once it has a connection. */
    private Duration operationTimeout = Duration.ofSeconds(5);

    /**
     * Whether writing an outcome waits for the database to flush it to disk, as a claim always
     * does. Off by default: on PostgreSQL the outcome commits without waiting for the WAL flush.
     */
    private boolean synchronousOutcomes = false;

    /**
     * How long a call waits for a connection from the pool before it fails (503), however long the
     * pool's own timeout (Hikari's default is 30 s).
     */
    private Duration connectionWait = Duration.ofSeconds(2);

    private final Purge purge = new Purge();

    /**
     * The connection wait.
     *
     * @return the connection wait
     */
    public Duration getConnectionWait() {
      return connectionWait;
    }

    /**
     * Sets the connection wait.
     *
     * @param connectionWait the connection wait
     */
    public void setConnectionWait(Duration connectionWait) {
      this.connectionWait = connectionWait;
    }

    /**
     * The purge.
     *
     * @return the purge
     */
    public Purge getPurge() {
      return purge;
    }

    /**
     * Whether outcomes wait for the disk flush.
     *
     * @return {@code true} if every outcome is flushed before the call returns
     */
    public boolean isSynchronousOutcomes() {
      return synchronousOutcomes;
    }

    /**
     * Sets whether outcomes wait for the disk flush.
     *
     * @param synchronousOutcomes {@code true} to flush every outcome before returning
     */
    public void setSynchronousOutcomes(boolean synchronousOutcomes) {
      this.synchronousOutcomes = synchronousOutcomes;
    }

    /**
     * The table name.
     *
     * @return the name
     */
    public String getTableName() {
      return tableName;
    }

    /**
     * Sets the table name.
     *
     * @param tableName the name
     */
    public void setTableName(String tableName) {
      this.tableName = tableName;
    }

    /**
     * When to create the table.
     *
     * @return the setting
     */
    public SchemaInitialization getInitializeSchema() {
      return initializeSchema;
    }

    /**
     * Sets when to create the table.
     *
     * @param initializeSchema the setting
     */
    public void setInitializeSchema(SchemaInitialization initializeSchema) {
      this.initializeSchema = initializeSchema;
    }

    /**
     * Whether to use database time.
     *
     * @return {@code true} for database time
     */
    public boolean isDatabaseTime() {
      return databaseTime;
    }

    /**
     * Sets database time.
     *
     * @param databaseTime {@code true} for database time
     */
    public void setDatabaseTime(boolean databaseTime) {
      this.databaseTime = databaseTime;
    }

    /**
     * The operation timeout.
     *
     * @return the timeout
     */
    public Duration getOperationTimeout() {
      return operationTimeout;
    }

    /**
     * Sets the operation timeout.
     *
     * @param operationTimeout the timeout
     */
    public void setOperationTimeout(Duration operationTimeout) {
      this.operationTimeout = operationTimeout;
    }
  }

  /** The starter's purge of expired JDBC rows. */
  public static class Purge {

    /** Whether the starter deletes rows past their window on a schedule. */
    private boolean enabled = true;

    /** The time between purge runs; the first run comes at a random point within one interval. */
    private Duration interval = Duration.ofMinutes(5);

    /** Rows one purge statement deletes at most; a run repeats it until fewer are left. */
    private int batchSize = 5_000;

    /**
     * The enabled.
     *
     * @return the enabled
     */
    public boolean isEnabled() {
      return enabled;
    }

    /**
     * Sets the enabled.
     *
     * @param enabled the enabled
     */
    public void setEnabled(boolean enabled) {
      this.enabled = enabled;
    }

    /**
     * The interval.
     *
     * @return the interval
     */
    public Duration getInterval() {
      return interval;
    }

    /**
     * Sets the interval.
     *
     * @param interval the interval
     */
    public void setInterval(Duration interval) {
      this.interval = interval;
    }

    /**
     * The batch size.
     *
     * @return the batch size
     */
    public int getBatchSize() {
      return batchSize;
    }

    /**
     * Sets the batch size.
     *
     * @param batchSize the batch size
     */
    public void setBatchSize(int batchSize) {
      this.batchSize = batchSize;
    }
  }

  /** The Redis store's settings. */
  public static class Redis {

    /** The prefix of every Redis key: up to 64 characters of [A-Za-z0-9_:.-]. */
    private String keyPrefix = "idem:";

    /** The most one store operation may take, whatever the client's command timeout. */
    private Duration operationTimeout = Duration.ofSeconds(2);

    /**
     * The key prefix.
     *
     * @return the prefix
     */
    public String getKeyPrefix() {
      return keyPrefix;
    }

    /**
     * Sets the key prefix.
     *
     * @param keyPrefix the prefix
     */
    public void setKeyPrefix(String keyPrefix) {
      this.keyPrefix = keyPrefix;
    }

    /**
     * The operation timeout.
     *
     * @return the timeout
     */
    public Duration getOperationTimeout() {
      return operationTimeout;
    }

    /**
     * Sets the operation timeout.
     *
     * @param operationTimeout the timeout
     */
    public void setOperationTimeout(Duration operationTimeout) {
      this.operationTimeout = operationTimeout;
    }
  }

  /** The DynamoDB store's settings (idempotency-dynamodb, on the application's DynamoDbClient). */
  public static class DynamoDb {

    /** The table: partition key "id" (string), TTL attribute "expiration". */
    private String tableName = "idempotency";

    /**
     * Whether to create the table (on-demand capacity, TTL on) at startup when it is missing. Off
     * by default: create it with your infrastructure code, and a missing table fails the start.
     */
    private boolean createTableIfMissing = false;

    /**
     * The prefix of every key in the table, for tables shared by applications: up to 64 characters
     * of [A-Za-z0-9_:.-].
     */
    private String keyPrefix = "";

    /** The most one store operation may take, all attempts included. */
    private Duration operationTimeout = Duration.ofSeconds(2);

    /**
     * The most one attempt (one HTTP request to DynamoDB) may take; not longer than the operation
     * timeout.
     */
    private Duration attemptTimeout = Duration.ofSeconds(1);

    /** Attempts per operation, retries of throttling and transient errors included (1 to 10). */
    private int maxAttempts = 3;

    /**
     * The table name.
     *
     * @return the name
     */
    public String getTableName() {
      return tableName;
    }

    /**
     * Sets the table name.
     *
     * @param tableName the name
     */
    public void setTableName(String tableName) {
      this.tableName = tableName;
    }

    /**
     * Whether the table is created at startup when missing.
     *
     * @return whether to create it
     */
    public boolean isCreateTableIfMissing() {
      return createTableIfMissing;
    }

    /**
     * Sets whether the table is created at startup when missing.
     *
     * @param createTableIfMissing whether to create it
     */
    public void setCreateTableIfMissing(boolean createTableIfMissing) {
      this.createTableIfMissing = createTableIfMissing;
    }

    /**
     * The key prefix.
     *
     * @return the prefix
     */
    public String getKeyPrefix() {
      return keyPrefix;
    }

    /**
     * Sets the key prefix.
     *
     * @param keyPrefix the prefix
     */
    public void setKeyPrefix(String keyPrefix) {
      this.keyPrefix = keyPrefix;
    }

    /**
     * The operation timeout.
     *
     * @return the timeout
     */
    public Duration getOperationTimeout() {
      return operationTimeout;
    }

    /**
     * Sets the operation timeout.
     *
     * @param operationTimeout the timeout
     */
    public void setOperationTimeout(Duration operationTimeout) {
      this.operationTimeout = operationTimeout;
    }

    /**
     * The attempt timeout.
     *
     * @return the timeout
     */
    public Duration getAttemptTimeout() {
      return attemptTimeout;
    }

    /**
     * Sets the attempt timeout.
     *
     * @param attemptTimeout the timeout
     */
    public void setAttemptTimeout(Duration attemptTimeout) {
      this.attemptTimeout = attemptTimeout;
    }

    /**
     * The attempts per operation.
     *
     * @return the attempts
     */
    public int getMaxAttempts() {
      return maxAttempts;
    }

    /**
     * Sets the attempts per operation.
     *
     * @param maxAttempts the attempts
     */
    public void setMaxAttempts(int maxAttempts) {
      this.maxAttempts = maxAttempts;
    }
  }

  /** The settings of {@code @IdempotentEndpoint}. */
  public static class Http {

    /** The request header that carries the key. */
    private String header = "Idempotency-Key";

    /** The largest request body read for the fingerprint; a larger one is refused with 413. */
    private DataSize maxBodySize = DataSize.ofMegabytes(1);

    /**
     * The largest response body held back to be stored. A larger one reaches the client as it comes
     * but is not stored: a repeat gets 422 (/problems/response-not-stored), not a second run.
     */
    private DataSize maxResponseSize = DataSize.ofMegabytes(1);

    /**
     * On WebFlux, how long a guarded endpoint's complete answer waits for its outcome to be
     * recorded (stored, or the key released) before it goes to the client anyway, the guard still
     * writing the outcome after it. A store that stalls between the claim and the record (a paused
     * Redis, a locked table) holds the answer this long. A Spring MVC endpoint waits on its request
     * thread as long as it waits for the claim (in-flight-wait plus a minute) and does not read
     * this.
     */
    private Duration recordWait = Duration.ofSeconds(10);

    /**
     * The shortest key accepted (400 below it). A key is the only secret of a client that is not
     * authenticated; a UUID has 36 characters.
     */
    private int minKeyLength = 16;

    /**
     * Whether the guard's refusals that reach a controller (from an {@code @Idempotent} method it
     * called) are answered as problems: 400 for a key that is not valid, 422 for a reused key, 409
     * for one in progress, 503 for a store outage, instead of a generic 500.
     */
    private boolean problemDetails = true;

    /**
     * Whether refusals reaching a controller are answered as problems.
     *
     * @return whether they are
     */
    public boolean isProblemDetails() {
      return problemDetails;
    }

    /**
     * Sets whether refusals reaching a controller are answered as problems.
     *
     * @param problemDetails whether they are
     */
    public void setProblemDetails(boolean problemDetails) {
      this.problemDetails = problemDetails;
    }

    /**
     * The header name.
     *
     * @return the name
     */
    public String getHeader() {
      return header;
    }

    /**
     * Sets the header name.
     *
     * @param header the name
     */
    public void setHeader(String header) {
      this.header = header;
    }

    /**
     * The largest body.
     *
     * @return the size
     */
    public DataSize getMaxBodySize() {
      return maxBodySize;
    }

    /**
     * Sets the largest body.
     *
     * @param maxBodySize the size
     */
    public void setMaxBodySize(DataSize maxBodySize) {
      this.maxBodySize = maxBodySize;
    }

    /**
     * The largest response body stored.
     *
     * @return the size
     */
    public DataSize getMaxResponseSize() {
      return maxResponseSize;
    }

    /**
     * Sets the largest response body stored.
     *
     * @param maxResponseSize the size
     */
    public void setMaxResponseSize(DataSize maxResponseSize) {
      this.maxResponseSize = maxResponseSize;
    }

    /**
     * How long a WebFlux endpoint's answer waits for its outcome to be recorded.
     *
     * @return the wait
     */
    public Duration getRecordWait() {
      return recordWait;
    }

    /**
     * Sets how long a WebFlux endpoint's answer waits for its outcome to be recorded.
     *
     * @param recordWait the wait
     */
    public void setRecordWait(Duration recordWait) {
      this.recordWait = recordWait;
    }

    /**
     * The shortest key accepted.
     *
     * @return the number of characters
     */
    public int getMinKeyLength() {
      return minKeyLength;
    }

    /**
     * Sets the shortest key accepted.
     *
     * @param minKeyLength the number of characters, 1 to 1024
     */
    public void setMinKeyLength(int minKeyLength) {
      this.minKeyLength = minKeyLength;
    }
  }
}
