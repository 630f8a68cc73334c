package dev.idempotency;

import dev.idempotency.spi.JoinedTransaction;
import dev.idempotency.spi.KeyStore;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;

/**
 * Wraps a provider call so that it runs at most once per key within a window.
 *
 * <pre>{@code
 * IdempotencyGuard guard = IdempotencyGuard.builder()
 *     .store(InMemoryKeyStore.builder().maximumSize(100_000).build())
 *     .build();
 *
 * String notificationId = guard.execute("otp:user_42:challenge_9f3a", Duration.ofHours(24),
 *     ctx -> sms.send(phone, code, ctx.providerKey()));
 * }</pre>
 *
 * <p>The first call with a key claims it, runs the sender and records its result; a repeat inside
 * the window returns the recorded result without calling the sender. A repeat that arrives while
 * the first call is still sending waits up to {@link Builder#inFlightWait(Duration)} for it. If a
 * process dies after the provider accepted a message and before the result was recorded, the key is
 * taken over once its lease expires and sent again: the rare duplicate, which the stable {@link
 * SendContext#providerKey()} lets a deduplicating provider absorb. While a sender runs, its lease
 * is renewed in the background, so a slow provider call is never taken over while its process
 * lives. This is at most one send per key within the window, not exactly-once delivery.
 *
 * <p>Instances are thread-safe; share one per store. A guard owns a few threads (its lease
 * keeper's, and the default executors): {@link #close()} it when the application stops, or use it
 * in try-with-resources in a command-line program.
 */
public final class IdempotencyGuard implements AutoCloseable {

  /**
   * The default lease: how long a claim stays {@code IN_PROGRESS} without renewal before a
   * takeover, so how long a crashed process blocks its keys.
   */
  public static final Duration DEFAULT_LEASE = Duration.ofSeconds(30);

  /** The default time a repeat waits for an in-flight first call. */
  public static final Duration DEFAULT_IN_FLIGHT_WAIT = Duration.ofSeconds(2);

  /** The MDC entry that holds the key's digest while a sender runs. */
  public static final String MDC_KEY = "idempotency.key";

  /** The MDC entry that holds the call's operation name while a sender runs. */
  public static final String MDC_OPERATION = "idempotency.operation";

  /** The MDC entry that holds the attempt while a sender runs. */
  public static final String MDC_ATTEMPT = "idempotency.attempt";

  /** The default limit of lease renewal for one send: 10 minutes. */
  public static final Duration DEFAULT_LEASE_RENEWAL_LIMIT = Duration.ofMinutes(10);

  /** The default number of attempts to record an outcome after a successful send. */
  public static final int DEFAULT_COMPLETION_ATTEMPTS = 3;

  /** The default cap on outcomes written in the background at once: 10,000. */
  public static final int DEFAULT_MAX_PENDING_OUTCOMES = 10_000;

  /**
   * How long {@link #close()} waits, at most, for work still queued on the guard's own threads once
   * the calls have finished or been abandoned.
   */
  public static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(10);

  /** The default time {@link #close()} lets running calls finish: 30 seconds. */
  public static final Duration DEFAULT_CLOSE_GRACE_PERIOD = Duration.ofSeconds(30);

  /** The default cap on distinct operation names one guard reports: 100. */
  public static final int DEFAULT_MAX_OPERATION_NAMES = 100;

  private final GuardSettings settings;

  private IdempotencyGuard(Builder builder) {
    this.settings = new GuardSettings(builder);
  }

  /**
   * Starts a builder.
   *
   * @return a new builder
   */
  public static Builder builder() {
    return new Builder();
  }

  /**
   * Runs the sender at most once for this key within {@code ttl}, storing its {@code String} (or
   * {@code null}) result; repeats get the stored result. Other result types name their codec:
   * {@link #execute(String, Duration, ResultCodec, Sender)}; a sender of another type does not
   * compile here, so no result can be lost on a replay.
   *
   * @param key the idempotency key, stable across retries (see {@link IdempotencyKey})
   * @param ttl the window, from the first claim; positive, at most 365 days, longer than the lease
   * @param sender the provider call
   * @return the sender's result, or the stored one on a repeat
   * @throws IllegalArgumentException if the key or ttl is invalid (nothing is touched or sent)
   * @throws NullPointerException if an argument is null
   * @throws IdempotencyInProgressException if the first call is still running after the wait
   * @throws IdempotencyStoredFailureException if the first call failed permanently
   * @throws IdempotencyResultUnavailableException if the first call sent but its result is gone
   * @throws IdempotencyOutcomeUnknownException in strict mode, after a crashed attempt
   * @throws KeyStoreException if the store failed before the claim (nothing was sent)
   * @throws SendFailedException if the sender threw a checked exception
   */
  public String execute(String key, Duration ttl, Sender<String> sender) {
    return executeForOutcome(IdempotencyRequest.of(key, ttl), ResultCodec.string(), sender).value();
  }

  /**
   * Like {@link #execute(String, Duration, Sender)}, storing the result with an explicit codec.
   *
   * @param key the idempotency key
   * @param ttl the window
   * @param codec encodes and decodes the result
   * @param sender the provider call
   * @param <T> the result type
   * @return the sender's result, or the stored one on a repeat
   */
  public <T> T execute(String key, Duration ttl, ResultCodec<T> codec, Sender<T> sender) {
    return executeForOutcome(IdempotencyRequest.of(key, ttl), codec, sender).value();
  }

  /**
   * Runs a guarded call and tells whether it was a replay, with a request fingerprint if given.
   *
   * <pre>{@code
   * Outcome<String> outcome = guard.executeForOutcome(
   *     IdempotencyRequest.of(key, ttl).withFingerprint(bodyHash), ResultCodec.string(), sender);
   * if (outcome.replayed()) response.header("Idempotent-Replayed", "?1");
   * }</pre>
   *
   * @param request the key, window and fingerprint
   * @param codec encodes and decodes the result
   * @param sender the provider call
   * @param <T> the result type
   * @return the outcome
   * @throws IdempotencyKeyReuseException if the key was used with another fingerprint
   */
  public <T> Outcome<T> executeForOutcome(
      IdempotencyRequest request, ResultCodec<T> codec, Sender<T> sender) {
    Objects.requireNonNull(request, "request must not be null");
    Objects.requireNonNull(codec, "codec must not be null");
    Objects.requireNonNull(sender, "sender must not be null");
    requireLeaseShorterThan(request.ttl());
    enter();
    try {
      return new GuardedCall<>(settings, request, codec, sender).run();
    } finally {
      settings.inFlight.exit();
    }
  }

  /**
   * Runs a guarded call inside the caller's open transaction, so that the key's record, what the
   * sender writes through that transaction and the outcome commit or roll back as one: for an
   * enqueue into the application's own database (an outbox or notification row), which then happens
   * exactly once per key within the window, crashes included. On a JDBC store:
   *
   * <pre>{@code
   * connection.setAutoCommit(false);
   * String rowId = guard.executeInTransaction(store.joining(connection), key, ttl,
   *     ctx -> outbox.insert(connection, phone, text));   // same connection, same transaction
   * connection.commit();
   * }</pre>
   *
   * <ul>
   *   <li>the claim is an uncommitted insert of the key's record: no lease, renewal or takeover
   *       applies, and a rollback (or a connection that dies) leaves no record, so a retry runs;
   *   <li>a repeat that finds a committed record replays it without writing, as {@link #execute}
   *       does; a concurrent repeat waits on the database's lock until the first transaction ends,
   *       at most {@link Builder#inFlightWait(Duration)}, then replays, claims after a rollback, or
   *       throws {@link IdempotencyInProgressException};
   *   <li>any failure of the store in the transaction (a deadlock or serialization failure
   *       included) is thrown as {@link KeyStoreException} and never retried: roll the transaction
   *       back and retry it whole; a sender that throws has its claim deleted in the transaction
   *       (or its permanent failure stored) and its exception reaches the caller;
   *   <li>a result that cannot be encoded is recorded as sent with no stored result, as in the
   *       usual mode: nothing is rolled back because of it.
   * </ul>
   *
   * Provider calls do not belong in a joined transaction: a rollback cannot take back a message a
   * provider accepted. Enqueue here, and send from a relay through {@link #execute} keyed by the
   * enqueued row's id.
   *
   * @param transaction the caller's open transaction on this guard's store
   * @param key the idempotency key
   * @param ttl the window
   * @param sender the write into the transaction
   * @return the sender's result, or the committed one on a repeat
   * @throws IllegalArgumentException if the transaction is of another store, or the key or ttl is
   *     invalid
   * @throws IdempotencyInProgressException if another transaction still held the key after the wait
   *     (nothing was written; roll back)
   * @throws KeyStoreException if the store failed in the transaction (roll back)
   */
  public String executeInTransaction(
      JoinedTransaction transaction, String key, Duration ttl, Sender<String> sender) {
    return executeInTransaction(
            transaction, IdempotencyRequest.of(key, ttl), ResultCodec.string(), sender)
        .value();
  }

  /**
   * Like {@link #executeInTransaction(JoinedTransaction, String, Duration, Sender)}, with a request
   * fingerprint and an explicit codec, telling a replay from a first call.
   *
   * @param transaction the caller's open transaction on this guard's store
   * @param request the key, window and fingerprint
   * @param codec encodes and decodes the result
   * @param sender the write into the transaction
   * @param <T> the result type
   * @return the outcome
   * @throws IdempotencyKeyReuseException if the key was used with another fingerprint
   */
  public <T> Outcome<T> executeInTransaction(
      JoinedTransaction transaction,
      IdempotencyRequest request,
      ResultCodec<T> codec,
      Sender<T> sender) {
    Objects.requireNonNull(transaction, "transaction must not be null");
    Objects.requireNonNull(request, "request must not be null");
    Objects.requireNonNull(codec, "codec must not be null");
    Objects.requireNonNull(sender, "sender must not be null");
    if (transaction.store() != settings.userStore) {
      throw new IllegalArgumentException(
          "the transaction is of another store ("
              + transaction.store().kind()
              + ") than this guard's ("
              + settings.userStore.kind()
              + "): join a transaction of the guard's own store");
    }
    requireLeaseShorterThan(request.ttl());
    enter();
    try {
      return new JoinedCall<>(settings, transaction, request, codec, sender).run();
    } finally {
      settings.inFlight.exit();
    }
  }

  /**
   * Like {@link #execute(String, Duration, Sender)}, without blocking: the returned stage completes
   * with the sender's result, or the stored one on a repeat, with the same semantics (replay,
   * waiting for an in-flight call without parking a thread, takeover, fenced completion, failure
   * classification). Exceptions arrive as the stage's failure, exactly as {@code execute} would
   * throw them.
   *
   * <p>On a store with an async API (Redis, in memory) no thread is held per call. A blocking store
   * (JDBC) is called on {@link Builder#blockingStoreExecutor(Executor)}. Once a store or the sender
   * answered, the call goes on (sender, codec, listeners, the outcome's write) on {@link
   * Builder#asyncExecutor(Executor)}, never on the store's I/O thread. A blocking sender adapted
   * with {@link AsyncSender#of(Sender)} occupies one of that executor's threads while it runs.
   *
   * @param key the idempotency key
   * @param ttl the window
   * @param sender the non-blocking provider call
   * @return the result
   */
  public CompletionStage<String> executeAsync(
      String key, Duration ttl, AsyncSender<String> sender) {
    return executeForOutcomeAsync(IdempotencyRequest.of(key, ttl), ResultCodec.string(), sender)
        .thenApply(Outcome::value);
  }

  /**
   * Like {@link #executeAsync(String, Duration, AsyncSender)}, storing the result with an explicit
   * codec.
   *
   * @param key the idempotency key
   * @param ttl the window
   * @param codec encodes and decodes the result
   * @param sender the non-blocking provider call
   * @param <T> the result type
   * @return the result
   */
  public <T> CompletionStage<T> executeAsync(
      String key, Duration ttl, ResultCodec<T> codec, AsyncSender<T> sender) {
    return executeForOutcomeAsync(IdempotencyRequest.of(key, ttl), codec, sender)
        .thenApply(Outcome::value);
  }

  /**
   * Like {@link #executeForOutcome}, without blocking; see {@link #executeAsync}.
   *
   * @param request the key, window and fingerprint
   * @param codec encodes and decodes the result
   * @param sender the non-blocking provider call
   * @param <T> the result type
   * @return the outcome
   */
  public <T> CompletionStage<Outcome<T>> executeForOutcomeAsync(
      IdempotencyRequest request, ResultCodec<T> codec, AsyncSender<T> sender) {
    return executeForOutcomeAsync(request, codec, sender, settings.asyncExecutor);
  }

  /**
   * Like {@link #executeForOutcomeAsync(IdempotencyRequest, ResultCodec, AsyncSender)}, with the
   * steps after a store or the sender answered run on {@code continueOn} rather than on {@link
   * Builder#asyncExecutor(Executor)}: for an integration whose caller waits for this call on a
   * thread of its own (a servlet request thread) and runs its steps there while it waits, which
   * saves a hand-over to another thread per step. A task {@code continueOn} rejects ({@link
   * java.util.concurrent.RejectedExecutionException}), because nobody waits any more, runs on the
   * guard's async executor instead. {@code continueOn} must never run a task on the thread that
   * submits it (that may be a store's I/O thread).
   *
   * @param request the key, window and fingerprint
   * @param codec encodes and decodes the result
   * @param sender the non-blocking provider call
   * @param continueOn where the call's steps run, falling back to the guard's async executor
   * @param <T> the result type
   * @return the outcome
   */
  public <T> CompletionStage<Outcome<T>> executeForOutcomeAsync(
      IdempotencyRequest request,
      ResultCodec<T> codec,
      AsyncSender<T> sender,
      Executor continueOn) {
    Objects.requireNonNull(request, "request must not be null");
    Objects.requireNonNull(codec, "codec must not be null");
    Objects.requireNonNull(sender, "sender must not be null");
    Objects.requireNonNull(continueOn, "continueOn must not be null");
    requireLeaseShorterThan(request.ttl());
    enter();
    Executor executor =
        continueOn == settings.asyncExecutor
            ? continueOn
            : task -> {
              try {
                continueOn.execute(task);
              } catch (java.util.concurrent.RejectedExecutionException nobodyWaits) {
                settings.asyncExecutor.execute(task);
              }
            };
    CompletableFuture<Outcome<T>> outcome;
    try {
      outcome = new AsyncGuardedCall<>(settings, request, codec, sender, executor).run();
    } catch (RuntimeException | Error e) {
      settings.inFlight.exit();
      throw e;
    }
    outcome.whenComplete((ignored, failure) -> settings.inFlight.exit());
    return outcome;
  }

  /**
   * Claims many keys at once, for a campaign's recipients, in as few round trips as the store
   * allows (one script call or pipeline per chunk on Redis, one multi-row statement on SQL), and
   * sorts them into keys to send, replays, keys in flight and refused keys. Chunks are at most
   * {@link KeyStore#maxBatchSize()} keys. See {@link Batch} for the rest of the protocol.
   *
   * @param requests the keys, windows and fingerprints; keys must be distinct
   * @param codec encodes and decodes results
   * @param <T> the result type
   * @return the claimed batch
   * @throws IllegalArgumentException on a duplicate key or a ttl not longer than the lease
   */
  public <T> Batch<T> claimBatch(List<IdempotencyRequest> requests, ResultCodec<T> codec) {
    Objects.requireNonNull(requests, "requests must not be null");
    Objects.requireNonNull(codec, "codec must not be null");
    for (IdempotencyRequest request : requests) {
      requireLeaseShorterThan(
          Objects.requireNonNull(request, "requests must not contain null").ttl());
    }
    enter(); // the claim itself counts as running: close() waits for it
    try {
      return new Batch<>(settings, requests, codec);
    } finally {
      settings.inFlight.exit();
    }
  }

  /**
   * Claims a campaign of any size one batch at a time, as it is iterated: the next batch of {@code
   * batchSize} keys is claimed only when the loop asks for it, after the previous one was recorded
   * (or is closed then, which records it). So only one batch's keys are held and renewed at a time,
   * whatever the campaign's size, and the requests may come from a stream that is never all in
   * memory.
   *
   * <pre>{@code
   * for (Batch<String> batch : guard.claimBatches(recipients, ResultCodec.string(), 10_000)) {
   *   for (Batch.Item item : batch.toSend()) {
   *     batch.succeeded(item, provider.send(recipientOf(item.key()), item.context().providerKey()));
   *   }
   * }
   * }</pre>
   *
   * <p>Each batch is recorded when the loop moves past it (asks for the next one, or finds none
   * left), if the loop did not call {@link Batch#record()} itself; a loop that stops early (an
   * exception) leaves its current batch to a try-with-resources on it, or to the renewal limit.
   *
   * <p>A key repeated in two batches is sent in the first and replayed in the second; within one
   * batch keys must be distinct ({@link #claimBatch}). The iterable may be iterated once.
   *
   * @param requests the keys, windows and fingerprints, read as the batches are claimed
   * @param codec encodes and decodes results
   * @param batchSize keys per batch, at least 1 (a few thousand: each batch is claimed in chunks of
   *     the store's {@link KeyStore#maxBatchSize()} and renewed while it is sent)
   * @param <T> the result type
   * @return the batches, claimed one at a time
   * @throws IllegalArgumentException if {@code batchSize} is not positive
   */
  public <T> Iterable<Batch<T>> claimBatches(
      Iterable<IdempotencyRequest> requests, ResultCodec<T> codec, int batchSize) {
    Objects.requireNonNull(requests, "requests must not be null");
    Objects.requireNonNull(codec, "codec must not be null");
    if (batchSize < 1) {
      throw new IllegalArgumentException("batchSize must be at least 1, was " + batchSize);
    }
    return new BatchSequence<>(requests, batchSize, next -> claimBatch(next, codec));
  }

  /**
   * Reports what the store holds for a key, without changing anything: for support ("was this sent,
   * when, at which attempt?") and operators. The key is validated as {@code execute} does. While
   * the store is known to fail (a call or lookup failed and it has not answered since), it is not
   * asked: the lookup fails at once with {@link KeyStoreException}, as {@code execute} does, until
   * the guard's own probe sees it answer again.
   *
   * @param key the idempotency key
   * @return the record, or empty if the key was never claimed or its window has passed
   * @throws IllegalArgumentException if the key is invalid
   * @throws UnsupportedOperationException if the store cannot read single records
   * @throws UnreadableRecordException if the store holds a record for the key that it cannot read:
   *     this lookup's error, not an outage (other calls are not refused because of it)
   * @throws KeyStoreException if the store failed
   * @throws IllegalStateException if the guard is closed
   */
  public Optional<IdempotencyRecord> find(String key) {
    String keyId = Digests.keyId(IdempotencyKey.requireValid(key));
    requireOpen();
    return RecordLookups.find(settings, keyId);
  }

  /**
   * Forgets a key that was sent (or failed for good), so that the next call with it sends again: an
   * operator's deliberate resend. A key in progress is refused, since its owner may be sending
   * right now; a key the store does not hold is not there to forget. While the store is known to
   * fail, it is not asked: {@link KeyStoreException} at once, as for {@link #find}.
   *
   * @param key the idempotency key
   * @return {@code true} if a completed or failed record was deleted; {@code false} if the key is
   *     in progress, absent, or past its window
   * @throws IllegalArgumentException if the key is invalid
   * @throws UnsupportedOperationException if the store cannot delete single records
   * @throws UnreadableRecordException if the store holds a record for the key that it cannot read:
   *     this deletion's error, not an outage (other calls are not refused because of it)
   * @throws KeyStoreException if the store failed
   * @throws IllegalStateException if the guard is closed
   */
  public boolean forget(String key) {
    String keyId = Digests.keyId(IdempotencyKey.requireValid(key));
    requireOpen();
    return RecordLookups.forget(settings, keyId);
  }

  /**
   * Closes the guard, letting the calls already running finish first:
   *
   * <ol>
   *   <li>calls made from now on fail with {@link IllegalStateException}, and batches hand out no
   *       more keys (those not handed out go to {@link Batch#lapsed()}, to be released at {@link
   *       Batch#record()});
   *   <li>calls already running (blocking and async calls, a batch's keys handed out and not yet
   *       reported, and outcomes the store did not take in a call's own attempts that the guard
   *       goes on writing, see {@link Builder#maxPendingOutcomes(int)}) finish as they would have,
   *       for at most the {@link Builder#closeGracePeriod(Duration) grace period}: their leases are
   *       renewed and their outcomes recorded meanwhile;
   *   <li>what outlives it is abandoned as a crash would leave it, with one WARN saying how many
   *       (an abandoned outcome write is reported as {@link
   *       IdempotencyEvent.Type#OUTCOME_ABANDONED}): its lease is no longer renewed and runs out,
   *       its key is never released (its send may have happened), an async call's stage fails with
   *       {@link IllegalStateException} if the guard's own threads can no longer carry it, and a
   *       call that had not started its send never starts it ({@link KeyStoreException}, nothing
   *       sent) nor keeps its key claimed (a claim not yet sent to the store is not sent, one
   *       granted meanwhile is released, fenced); an outcome write the guard already sent to the
   *       store is not interrupted: close() waits for its answer (for at most what is left of
   *       {@link #CLOSE_TIMEOUT}) and reports it as recorded or abandoned, once, before it returns;
   *   <li>the outcomes that unrecorded batches reported are written, lease renewal stops, and the
   *       executors the guard created itself are shut down (work still queued on them runs, for at
   *       most what is left of {@link #CLOSE_TIMEOUT}; a probe of a failing store is stopped, not
   *       waited for); executors the application gave it are left alone, and so is the store.
   * </ol>
   *
   * Idempotent: a second call returns once the first has finished. Do not call it from inside a
   * sender of this guard: it would wait its grace period for that very call. Called on a thread of
   * one of the guard's own pools (a callback of a stage this guard completed), it does not wait for
   * that pool nor interrupt that thread.
   */
  @Override
  public void close() {
    if (settings.close(CLOSE_TIMEOUT.toMillis())) {
      CallEvents.log.debug("Closed the idempotency guard");
    }
  }

  private void requireOpen() {
    if (settings.closed()) {
      throw closedException();
    }
  }

  /** Counts a call as running, so that {@link #close()} lets it finish; refuses it once closing. */
  private void enter() {
    if (!settings.inFlight.enter()) {
      throw closedException();
    }
  }

  private static IllegalStateException closedException() {
    return new IllegalStateException("the IdempotencyGuard is closed");
  }

  private void requireLeaseShorterThan(Duration ttl) {
    if (settings.lease.compareTo(ttl) >= 0) {
      throw new IllegalArgumentException(
          "lease ("
              + settings.lease
              + ") must be shorter than ttl ("
              + ttl
              + "); configure a shorter lease or a longer ttl");
    }
  }

  /** What this guard was built with; for tests in this package. */
  GuardSettings settings() {
    return settings;
  }

  /**
   * The lease this guard claims keys with: every window must be longer.
   *
   * @return the lease
   */
  public Duration lease() {
    return settings.lease;
  }

  /**
   * How long a repeat waits for an in-flight first call before {@link
   * IdempotencyInProgressException}.
   *
   * @return the wait
   */
  public Duration inFlightWait() {
    return settings.inFlightWait;
  }

  /**
   * How long {@link #close()} lets the calls still running finish ({@link
   * Builder#closeGracePeriod(Duration)}).
   *
   * @return the grace period
   */
  public Duration closeGracePeriod() {
    return Duration.ofNanos(settings.closeGraceNanos);
  }

  /**
   * The store this guard uses.
   *
   * @return the store
   */
  public KeyStore store() {
    return settings.userStore;
  }

  /**
   * Builds an {@link IdempotencyGuard}. Every setter validates its argument at once. Not
   * thread-safe.
   */
  public static final class Builder {
    KeyStore store;
    Duration lease = DEFAULT_LEASE;
    Duration inFlightWait = DEFAULT_IN_FLIGHT_WAIT;
    Clock clock = Clock.systemUTC();
    TakeoverPolicy takeoverPolicy = TakeoverPolicy.TAKE_OVER;
    FailureClassifier failureClassifier = FailureClassifier.neverPermanent();
    boolean failOpen;
    final java.util.Map<String, Boolean> failOpenByOperation = new java.util.HashMap<>();
    int completionAttempts = DEFAULT_COMPLETION_ATTEMPTS;
    int maxPendingOutcomes = DEFAULT_MAX_PENDING_OUTCOMES;
    boolean storeRawKeys;
    boolean leaseRenewal = true;
    Duration leaseRenewalLimit = DEFAULT_LEASE_RENEWAL_LIMIT;
    Duration closeGracePeriod = DEFAULT_CLOSE_GRACE_PERIOD;
    Executor blockingStoreExecutor;
    Executor asyncExecutor;
    boolean mdc = true;
    int maxOperationNames = DEFAULT_MAX_OPERATION_NAMES;
    NearCache nearCache;
    final List<IdempotencyListener> listeners = new ArrayList<>();
    final List<IdempotencyObserver> observers = new ArrayList<>();

    private Builder() {}

    /**
     * The store of records. Required.
     *
     * @param store the store
     * @return this builder
     */
    public Builder store(KeyStore store) {
      this.store = Objects.requireNonNull(store, "store must not be null");
      return this;
    }

    /**
     * How long a claim stays {@code IN_PROGRESS} without renewal before another caller may take it
     * over: the time a crashed process blocks its keys. While a sender runs, the guard renews the
     * lease in the background (see {@link #leaseRenewal(boolean)}), so it need not cover the
     * slowest send; without renewal, set it above the slowest provider call you expect (with its
     * timeouts). A sender that outlives it anyway is reported as {@link
     * IdempotencyEvent.Type#LEASE_OVERRUN}. Must be shorter than every ttl. Default {@link
     * #DEFAULT_LEASE}.
     *
     * @param lease at least 1 ms (stores keep whole milliseconds)
     * @return this builder
     */
    public Builder lease(Duration lease) {
      Objects.requireNonNull(lease, "lease must not be null");
      if (lease.toMillis() < 1) {
        throw new IllegalArgumentException("lease must be at least 1 ms, was " + lease);
      }
      this.lease = lease;
      return this;
    }

    /**
     * Whether the guard renews a claim's lease while its sender runs, fenced by the owner token, so
     * that a live sender is never taken over however slow the provider is, while a crashed process
     * still frees its keys one lease after its last renewal. Renewal runs in the background on the
     * guard's own threads, a quarter of a lease after the last one (by the monotonic clock, so a
     * step of the wall clock changes nothing), for at most {@link #leaseRenewalLimit(Duration)}; a
     * send that ends sooner than a quarter of the lease costs no store call for it. A renewed
     * record lives at least one lease beyond now, even past its window. A send never starts with
     * less than a quarter of its lease left: a claim answered late is renewed first, and refused if
     * even then too little is left. Batches renew the keys they have not recorded yet whatever this
     * says. Default {@code true}.
     *
     * @param renew {@code false} to let every claim run out after one lease
     * @return this builder
     */
    public Builder leaseRenewal(boolean renew) {
      this.leaseRenewal = renew;
      return this;
    }

    /**
     * For how long, at most, a claim is renewed while its sender runs (and a batch's keys while the
     * batch is idle). A sender still running after that is treated as hung: its lease runs out and
     * a repeat may take the key over. Default {@link #DEFAULT_LEASE_RENEWAL_LIMIT}.
     *
     * @param limit a positive duration
     * @return this builder
     */
    public Builder leaseRenewalLimit(Duration limit) {
      Objects.requireNonNull(limit, "leaseRenewalLimit must not be null");
      if (limit.isNegative() || limit.isZero()) {
        throw new IllegalArgumentException("leaseRenewalLimit must be positive, was " + limit);
      }
      this.leaseRenewalLimit = limit;
      return this;
    }

    /**
     * How long {@link IdempotencyGuard#close()} lets the calls already running finish, their leases
     * renewed and their outcomes recorded, before it abandons the rest as a crash would (their
     * leases run out; nothing is released). Size it like the slowest send you expect, and no longer
     * than the time your platform gives a stopping process (Kubernetes' {@code
     * terminationGracePeriodSeconds}, Spring's shutdown phase timeout). Default {@link
     * #DEFAULT_CLOSE_GRACE_PERIOD}.
     *
     * @param gracePeriod zero (abandon at once) or positive
     * @return this builder
     */
    public Builder closeGracePeriod(Duration gracePeriod) {
      Objects.requireNonNull(gracePeriod, "closeGracePeriod must not be null");
      if (gracePeriod.isNegative()) {
        throw new IllegalArgumentException(
            "closeGracePeriod must not be negative, was " + gracePeriod);
      }
      this.closeGracePeriod = gracePeriod;
      return this;
    }

    /**
     * How long a repeat waits (in real time, polling with backoff) for an in-flight first call to
     * finish before it throws {@link IdempotencyInProgressException}. Zero means do not wait.
     * Default {@link #DEFAULT_IN_FLIGHT_WAIT}.
     *
     * @param inFlightWait zero or positive
     * @return this builder
     */
    public Builder inFlightWait(Duration inFlightWait) {
      Objects.requireNonNull(inFlightWait, "inFlightWait must not be null");
      if (inFlightWait.isNegative()) {
        throw new IllegalArgumentException(
            "inFlightWait must not be negative, was " + inFlightWait);
      }
      this.inFlightWait = inFlightWait;
      return this;
    }

    /**
     * The clock for leases and windows on stores that take time from the guard (the in-memory
     * store, the JDBC store unless set to database time). The Redis store uses its server's time.
     * Default {@link Clock#systemUTC()}.
     *
     * @param clock the clock
     * @return this builder
     */
    public Builder clock(Clock clock) {
      this.clock = Objects.requireNonNull(clock, "clock must not be null");
      return this;
    }

    /**
     * What to do with a claim that outlived its lease without an outcome. Default {@link
     * TakeoverPolicy#TAKE_OVER}; {@link TakeoverPolicy#REFUSE} is strict mode.
     *
     * @param policy the policy
     * @return this builder
     */
    public Builder takeoverPolicy(TakeoverPolicy policy) {
      this.takeoverPolicy = Objects.requireNonNull(policy, "takeoverPolicy must not be null");
      return this;
    }

    /**
     * Decides which sender failures are permanent and stored for the window. Default: none.
     *
     * @param classifier the classifier
     * @return this builder
     */
    public Builder failureClassifier(FailureClassifier classifier) {
      this.failureClassifier =
          Objects.requireNonNull(classifier, "failureClassifier must not be null");
      return this;
    }

    /**
     * Whether to send anyway when the store fails before the claim, for sends where a duplicate is
     * cheaper than a miss. Every such send is reported as {@link
     * IdempotencyEvent.Type#FAIL_OPEN_SEND} and logged. Default {@code false}: fail closed with
     * {@link KeyStoreException}.
     *
     * @param failOpen {@code true} to fail open
     * @return this builder
     */
    public Builder failOpen(boolean failOpen) {
      this.failOpen = failOpen;
      return this;
    }

    /**
     * Whether calls of one operation ({@link IdempotencyRequest#withOperation(String)}) fail open,
     * overriding {@link #failOpen(boolean)} for them: an OTP fails closed while a marketing send
     * fails open, on one guard. Calls without an operation, and operations not named here, follow
     * {@link #failOpen(boolean)}.
     *
     * @param operationName the operation, as the requests name it
     * @param failOpen {@code true} to send anyway when the store fails before the claim
     * @return this builder
     * @throws IllegalArgumentException if the name is not an operation name
     */
    public Builder failOpen(String operationName, boolean failOpen) {
      IdempotencyRequest.requireOperation(operationName);
      this.failOpenByOperation.put(operationName, failOpen);
      return this;
    }

    /**
     * How many times to try recording an outcome after a successful send before giving up (and
     * returning the result anyway). The pauses between tries double from 50 ms, at most a second.
     * Default {@link #DEFAULT_COMPLETION_ATTEMPTS}.
     *
     * @param attempts at least 1
     * @return this builder
     */
    public Builder completionAttempts(int attempts) {
      if (attempts < 1) {
        throw new IllegalArgumentException(
            "completionAttempts must be at least 1, was " + attempts);
      }
      this.completionAttempts = attempts;
      return this;
    }

    /**
     * How many outcomes, at most, the guard goes on writing in the background once a call's own
     * {@link #completionAttempts(int) attempts} failed. The caller has its result at once either
     * way (the send happened; the call reports {@link IdempotencyEvent.Type#OUTCOME_NOT_RECORDED});
     * the guard then retries the fenced write on a thread of its own, pausing 50 ms, then twice as
     * long each time, at most a second, while the lease keeper goes on renewing the claim, until
     * the store takes it ({@link IdempotencyEvent.Type#OUTCOME_RECORDED_LATE}: a repeat replays it
     * instead of sending again), another call took the key over, or the claim's lease has ended by
     * the guard's estimate ({@link IdempotencyEvent.Type#OUTCOME_ABANDONED}, with one WARN per
     * round that names no key); the keeper renews it at most until the {@link
     * #leaseRenewalLimit(Duration) renewal limit}, so a write ends one lease after that at the
     * latest. {@link IdempotencyGuard#close()} lets these writes finish within its grace period
     * like running calls. Past the cap a call's outcome is not written later. Default {@link
     * #DEFAULT_MAX_PENDING_OUTCOMES}.
     *
     * <p>The same cap bounds the claims the guard takes back in the background: a claim that failed
     * after it reached the store (a timeout on a stalled store, a lost answer), for which nothing
     * was sent, may be applied by the store later; the guard releases it, fenced by its owner
     * token, until the store answers and then five more times over one lease. Zero turns that off
     * too.
     *
     * @param max zero (never write in the background) or more
     * @return this builder
     */
    public Builder maxPendingOutcomes(int max) {
      if (max < 0) {
        throw new IllegalArgumentException("maxPendingOutcomes must not be negative, was " + max);
      }
      this.maxPendingOutcomes = max;
      return this;
    }

    /**
     * Also keep each raw key beside its record, for debugging. Off by default: stores keep only a
     * digest, because keys often carry phone numbers or email addresses.
     *
     * @param storeRawKeys {@code true} to keep raw keys at rest
     * @return this builder
     */
    public Builder storeRawKeys(boolean storeRawKeys) {
      this.storeRawKeys = storeRawKeys;
      return this;
    }

    /**
     * Where the calls of a blocking store (the JDBC store) run for {@link #executeAsync}, so that
     * the caller's thread never blocks, and where a batch's outcomes are written in the background.
     * Lease renewal never runs here: each guard renews on two threads of its own, so that a busy
     * executor never lets a live send be taken over. Size it like the store's connection pool.
     * Default: the guard's own pool of up to 16 daemon threads named {@code
     * idempotency-g<guard>-store-io-N}, created as work arrives and shut down by {@link
     * IdempotencyGuard#close()}; an executor given here is the application's, never shut down by
     * the guard.
     *
     * @param executor the executor
     * @return this builder
     */
    public Builder blockingStoreExecutor(Executor executor) {
      this.blockingStoreExecutor =
          Objects.requireNonNull(executor, "blockingStoreExecutor must not be null");
      return this;
    }

    /**
     * Where {@link #executeAsync} goes on once a store or a sender answered: the sender itself, the
     * codec, listeners and the write of the outcome run here, never on a store's I/O thread (such
     * as Lettuce's event loop, which a blocking sender would stall for every other Redis call).
     * Default: a pool of daemon threads named {@code idempotency-async-N}, twice the processors and
     * at least four, shared by every guard. A stage that is already complete when the guard looks
     * at it goes on on the thread that looked (the caller's, or one of this executor's).
     *
     * @param executor the executor
     * @return this builder
     */
    public Builder asyncExecutor(Executor executor) {
      this.asyncExecutor = Objects.requireNonNull(executor, "asyncExecutor must not be null");
      return this;
    }

    /**
     * Adds a listener for {@link IdempotencyEvent}s. May be called more than once.
     *
     * @param listener the listener
     * @return this builder
     */
    public Builder listener(IdempotencyListener listener) {
      listeners.add(Objects.requireNonNull(listener, "listener must not be null"));
      return this;
    }

    /**
     * Adds an observer: it sees every event, every {@code execute} call from its start to its end,
     * and the time of every store operation, for metrics and traces (module {@code
     * idempotency-micrometer}). May be called more than once.
     *
     * @param observer the observer
     * @return this builder
     */
    public Builder observer(IdempotencyObserver observer) {
      observers.add(Objects.requireNonNull(observer, "observer must not be null"));
      return this;
    }

    /**
     * Whether the key's digest, the operation and the attempt are put into SLF4J's MDC while a
     * sender runs ({@link #MDC_KEY}, {@link #MDC_OPERATION}, {@link #MDC_ATTEMPT}), so that the
     * provider client's own log lines can be tied to the call. They are removed afterwards, also on
     * the async path (where they hold while the sender's stage is being started). Default {@code
     * true}.
     *
     * @param mdc {@code false} to leave the MDC alone
     * @return this builder
     */
    public Builder mdc(boolean mdc) {
      this.mdc = mdc;
      return this;
    }

    /**
     * How many distinct operation names this guard reports in events, logs, the MDC and metrics;
     * later ones are reported as {@code other}, with one WARN. An operation names a kind of send
     * ({@code otp-sms}); a key's namespace that is in fact an id ({@code user-42:welcome}) would
     * otherwise flood a metrics backend. Default {@link #DEFAULT_MAX_OPERATION_NAMES}.
     *
     * @param max at least 1
     * @return this builder
     */
    public Builder maxOperationNames(int max) {
      if (max < 1) {
        throw new IllegalArgumentException("maxOperationNames must be at least 1, was " + max);
      }
      this.maxOperationNames = max;
      return this;
    }

    /**
     * Replays completed records from memory once the store has answered them to a repeat: see
     * {@link NearCache} for what it promises, and what a {@code forget} on another instance means
     * while an entry lives here. Off by default.
     *
     * @param nearCache the cache's bounds
     * @return this builder
     */
    public Builder nearCache(NearCache nearCache) {
      this.nearCache = Objects.requireNonNull(nearCache, "nearCache must not be null");
      return this;
    }

    /**
     * Builds the guard. Nothing is connected or started here; the lease keeper starts on the first
     * send and stops when nothing is left to renew.
     *
     * @return the guard
     * @throws IllegalStateException if no store was set
     */
    public IdempotencyGuard build() {
      if (store == null) {
        throw new IllegalStateException("store is required: call store(KeyStore) before build()");
      }
      return new IdempotencyGuard(this);
    }
  }
}
