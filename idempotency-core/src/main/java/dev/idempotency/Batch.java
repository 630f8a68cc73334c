package dev.idempotency;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spi.RecordState;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A batch of keys claimed together by {@link IdempotencyGuard#claimBatch}, for a campaign's
 * recipients:
 *
 * <pre>{@code
 * Batch<String> batch = guard.claimBatch(requests, ResultCodec.string());
 * for (Batch.Item item : batch.toSend()) {
 *   try {
 *     batch.succeeded(item, provider.send(recipientOf(item.key()), item.context().providerKey()));
 *   } catch (Exception e) {
 *     batch.failed(item, e);
 *   }
 * }
 * Batch.Recorded recorded = batch.record();   // one round trip per chunk of outcomes
 * }</pre>
 *
 * <p>Per key, everything {@link IdempotencyGuard#execute} guarantees holds: a claimed key is fenced
 * by its own owner token; a repeat within the window is replayed; a failure of one recipient
 * releases (or, if permanent, stores) only that key. A batch does not wait for keys in flight: it
 * hands them back in {@link #inFlight()} for the caller to retry later. A store failure is reported
 * per key in {@link #refused()}, never skipped silently.
 *
 * <p>{@link #succeeded} and {@link #failed} may be called from several threads; {@link #record()}
 * once, after every item has an outcome (items left without one are released).
 *
 * @param <T> the result type
 */
public final class Batch<T> {

  /** A claimed key the caller may send for. */
  public static final class Item {
    private final String key;
    private final SendContext context;
    private final String ownerToken;
    private final boolean recordable;

    Item(String key, SendContext context, String ownerToken, boolean recordable) {
      this.key = key;
      this.context = context;
      this.ownerToken = ownerToken;
      this.recordable = recordable;
    }

    /**
     * The idempotency key.
     *
     * @return the key
     */
    public String key() {
      return key;
    }

    /**
     * What the send needs: the provider keys and the attempt.
     *
     * @return the context
     */
    public SendContext context() {
      return context;
    }
  }

  /**
   * What {@link #record()} wrote.
   *
   * @param completed outcomes recorded as sent
   * @param failuresStored permanent failures stored for the window
   * @param released keys released for a retry (failed transiently, or given no outcome)
   * @param notRecorded keys sent whose outcome could not be recorded (a repeat may send again)
   */
  public record Recorded(
      int completed, int failuresStored, int released, Set<String> notRecorded) {}

  private final Map<String, CallSupport<T>> calls;
  private final KeyStore store;
  private final int completionAttempts;
  private final List<Item> toSend = new ArrayList<>();
  private final Map<String, Outcome<T>> replayed = new LinkedHashMap<>();
  private final List<String> inFlight = new ArrayList<>();
  private final Map<String, IdempotencyException> refused = new LinkedHashMap<>();
  private final Map<Item, Object> results = new ConcurrentHashMap<>();
  private final Map<Item, Throwable> failures = new ConcurrentHashMap<>();
  private static final Object NULL = new Object();
  private boolean recorded;
  private RuntimeException lastFailure;

  Batch(CallSupport.Settings settings, List<IdempotencyRequest> requests, ResultCodec<T> codec) {
    this.store = settings.store();
    this.completionAttempts = settings.completionAttempts();
    this.calls = new LinkedHashMap<>();
    for (IdempotencyRequest request : requests) {
      Objects.requireNonNull(request, "requests must not contain null");
      if (calls.put(request.key(), new CallSupport<>(settings, request, codec)) != null) {
        throw new IllegalArgumentException(
            "the batch has a duplicate key (digest " + Digests.keyId(request.key()) + ")");
      }
    }
    List<CallSupport<T>> all = new ArrayList<>(calls.values());
    int chunk = Math.max(1, store.maxBatchSize());
    for (int from = 0; from < all.size(); from += chunk) {
      claim(all.subList(from, Math.min(all.size(), from + chunk)));
    }
  }

  private void claim(List<CallSupport<T>> chunk) {
    List<String> tokens = new ArrayList<>(chunk.size());
    List<ClaimRequest> claims = new ArrayList<>(chunk.size());
    // one instant for the chunk, so that a store can claim it in one statement
    Instant now = chunk.get(0).settings.clock().instant();
    for (CallSupport<T> call : chunk) {
      String token = CallSupport.newOwnerToken();
      tokens.add(token);
      claims.add(call.claimRequest(token, now));
    }
    List<ClaimResult> results;
    try {
      results = store.claimAll(claims);
    } catch (RuntimeException e) {
      for (int i = 0; i < chunk.size(); i++) {
        storeFailed(chunk.get(i), e);
      }
      return;
    }
    for (int i = 0; i < chunk.size(); i++) {
      CallSupport<T> call = chunk.get(i);
      ClaimResult result = results.get(i);
      if (result instanceof ClaimResult.Claimed claimed) {
        call.reportClaimed(claimed);
        toSend.add(
            new Item(call.request.key(), call.context(claimed.attempt()), tokens.get(i), true));
      } else if (result instanceof ClaimResult.Failed failed) {
        storeFailed(call, failed.error());
      } else {
        try {
          Outcome<T> outcome = call.resolveExisting((ClaimResult.Existing) result, 0);
          if (outcome != null) {
            replayed.put(call.request.key(), outcome);
          } else {
            inFlight.add(call.request.key());
          }
        } catch (IdempotencyException e) {
          refused.put(call.request.key(), e);
        }
      }
    }
  }

  private void storeFailed(CallSupport<T> call, Throwable error) {
    KeyStoreException storeFailure = call.claimFailed(error);
    if (call.settings.failOpen()) {
      call.reportFailOpen(storeFailure);
      toSend.add(new Item(call.request.key(), call.context(1), "", false));
    } else {
      refused.put(call.request.key(), storeFailure);
    }
  }

  /**
   * The keys claimed for this batch: send each, then report it with {@link #succeeded} or {@link
   * #failed}.
   *
   * @return the items, in request order
   */
  public List<Item> toSend() {
    return Collections.unmodifiableList(toSend);
  }

  /**
   * Keys sent before within their window, with their stored results: do not send them.
   *
   * @return key to outcome, in request order
   */
  public Map<String, Outcome<T>> replayed() {
    return Collections.unmodifiableMap(replayed);
  }

  /**
   * Keys another caller is sending right now: retry them later.
   *
   * @return the keys
   */
  public List<String> inFlight() {
    return Collections.unmodifiableList(inFlight);
  }

  /**
   * Keys that must not be sent, with the exception {@code execute} would have thrown: key reuse, a
   * stored permanent failure, an unknown outcome (strict mode), an unavailable result, or a store
   * failure.
   *
   * @return key to exception, in request order
   */
  public Map<String, IdempotencyException> refused() {
    return Collections.unmodifiableMap(refused);
  }

  /**
   * Reports a successful send.
   *
   * @param item an item of {@link #toSend()}
   * @param result the provider's result; may be {@code null}
   */
  public void succeeded(Item item, T result) {
    requireOpen(item);
    results.put(item, result == null ? NULL : result);
  }

  /**
   * Reports a failed send: the key is released for a retry, or its failure stored if the guard's
   * {@link FailureClassifier} calls it permanent.
   *
   * @param item an item of {@link #toSend()}
   * @param failure what the send threw
   */
  public void failed(Item item, Throwable failure) {
    requireOpen(item);
    failures.put(item, Objects.requireNonNull(failure, "failure must not be null"));
  }

  private void requireOpen(Item item) {
    Objects.requireNonNull(item, "item must not be null");
    if (!toSend.contains(item)) {
      throw new IllegalArgumentException("the item does not belong to this batch");
    }
    if (recorded) {
      throw new IllegalStateException("record() was already called");
    }
  }

  /**
   * Records every reported outcome: completions and stored failures in one round trip per chunk
   * (retried a few times on store failure), releases one key at a time. Items without an outcome
   * are released. Never throws for a store failure after the sends: such keys are listed in {@link
   * Recorded#notRecorded()} and reported as {@link IdempotencyEvent.Type#OUTCOME_NOT_RECORDED}.
   *
   * @return what was written
   */
  @SuppressWarnings("unchecked")
  public Recorded record() {
    if (recorded) {
      throw new IllegalStateException("record() was already called");
    }
    recorded = true;
    List<Item> writes = new ArrayList<>();
    List<CompleteRequest> completes = new ArrayList<>();
    List<Item> releases = new ArrayList<>();
    for (Item item : toSend) {
      if (!item.recordable) {
        continue;
      }
      CallSupport<T> call = calls.get(item.key);
      int attempt = item.context.attempt();
      Object result = results.get(item);
      Throwable failure = failures.get(item);
      if (result != null) {
        byte[] payload = call.encode(result == NULL ? null : (T) result, attempt);
        completes.add(complete(call, item, RecordState.COMPLETED, payload));
        writes.add(item);
      } else if (failure != null && call.isPermanent(CallSupport.senderFailure(failure))) {
        completes.add(
            complete(
                call,
                item,
                RecordState.FAILED,
                Payloads.failure(CallSupport.senderFailure(failure))));
        writes.add(item);
      } else {
        releases.add(item);
      }
    }
    int completed = 0;
    int stored = 0;
    Set<String> notRecorded = new HashSet<>();
    int chunk = Math.max(1, store.maxBatchSize());
    for (int from = 0; from < completes.size(); from += chunk) {
      int to = Math.min(completes.size(), from + chunk);
      List<Boolean> written = completeWithRetries(completes.subList(from, to));
      for (int i = from; i < to; i++) {
        Item item = writes.get(i);
        CallSupport<T> call = calls.get(item.key);
        boolean ok = written != null && written.get(i - from);
        if (!ok) {
          notRecorded.add(item.key);
          call.reportNotRecorded(item.context.attempt(), written == null ? lastFailure : null);
        } else if (completes.get(i).state() == RecordState.COMPLETED) {
          completed++;
          call.emit(Type.COMPLETED, item.context.attempt(), call.elapsed(), null);
        } else {
          stored++;
          call.emit(
              Type.FAILURE_STORED, item.context.attempt(), call.elapsed(), failures.get(item));
        }
      }
    }
    int released = 0;
    for (Item item : releases) {
      CallSupport<T> call = calls.get(item.key);
      try {
        if (store.release(call.keyId, item.ownerToken)) {
          released++;
          call.emit(Type.RELEASED, item.context.attempt(), call.elapsed(), failures.get(item));
        }
      } catch (RuntimeException e) {
        CallSupport.log.warn(
            "Could not release key {} after a failed send; it frees itself when the lease ends",
            call.keyId,
            e);
      }
    }
    return new Recorded(completed, stored, released, Collections.unmodifiableSet(notRecorded));
  }

  private List<Boolean> completeWithRetries(List<CompleteRequest> chunk) {
    int attempts = completionAttempts;
    for (int i = 1; i <= attempts; i++) {
      try {
        return store.completeAll(chunk);
      } catch (RuntimeException e) {
        lastFailure = e;
        try {
          Thread.sleep(CallSupport.COMPLETION_BACKOFF_MILLIS << (i - 1));
        } catch (InterruptedException interrupted) {
          Thread.currentThread().interrupt();
          return null;
        }
      }
    }
    return null;
  }

  private static <T> CompleteRequest complete(
      CallSupport<T> call, Item item, RecordState state, byte[] payload) {
    return new CompleteRequest(
        call.keyId, item.ownerToken, state, payload, call.settings.clock().instant());
  }
}
