package dev.idempotency.spring;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.KeyStoreException;
import dev.idempotency.Outcome;
import dev.idempotency.ResultCodec;
import dev.idempotency.SendContext;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicReference;
import org.jspecify.annotations.Nullable;
import org.slf4j.MDC;

/**
 * A guarded call whose work runs on the calling thread and whose result is reported later: the
 * shape of an HTTP request that completes after an async or error dispatch, and of an {@link
 * Idempotent} method that returns a {@code CompletionStage}. It is the guard's asynchronous call
 * with its sender split in two: {@link #claim} waits (on the calling thread) until the guard
 * claimed the key or answered without a send; the caller then runs the work itself, on its own
 * thread with its own context (security, MDC, request attributes), and reports the result with
 * {@link #complete} or {@link #fail}. While the work runs, the guard renews the claim's lease.
 *
 * <pre>{@code
 * PendingCall<Receipt> call = PendingCall.claim(guard, request, codec, Duration.ofMinutes(1));
 * if (call.claimed()) {
 *   try (PendingCall.Scope scope = call.enter()) {
 *     call.complete(send(call.context()));
 *   } catch (Exception e) {
 *     call.fail(e);
 *   }
 * }
 * Outcome<Receipt> outcome = call.outcome().join(); // a replay, a refusal or the recorded send
 * }</pre>
 *
 * <p>For the starter's integrations (web, messaging); applications use {@link IdempotencyGuard} or
 * {@link Idempotent}. Thread-safe: {@link #complete} and {@link #fail} may be called from any
 * thread, and only the first report counts.
 *
 * @param <T> the result type
 */
public final class PendingCall<T> {

  private enum State {
    WAITING,
    CLAIMED,
    ABANDONED
  }

  private final AtomicReference<State> state = new AtomicReference<>(State.WAITING);
  private final CompletableFuture<Claimed> claimed = new CompletableFuture<>();
  private final CompletableFuture<T> work = new CompletableFuture<>();
  private final CompletableFuture<Outcome<T>> outcome;
  private volatile boolean claimedHere;
  private final WaitingThreadExecutor steps = new WaitingThreadExecutor();

  /** What the sender saw when the guard handed it the key: its context and the MDC it set. */
  private record Claimed(SendContext context, Map<String, String> mdc) {}

  private PendingCall(IdempotencyGuard guard, IdempotencyRequest request, ResultCodec<T> codec) {
    this.outcome =
        guard.executeForOutcomeAsync(request, codec, this::handOver, steps).toCompletableFuture();
  }

  /**
   * Starts a guarded call and waits, on this thread, until the guard either claimed the key (then
   * {@link #claimed()} is true and this thread must run the work) or answered without a send (a
   * replay, a refusal, a store failure; then {@link #outcome()} is complete).
   *
   * @param guard the guard
   * @param request the key, window, fingerprint and operation
   * @param codec encodes and decodes the result
   * @param maxWait the longest this thread waits for the guard's decision (a repeat waits up to the
   *     guard's in-flight wait); past it the call is abandoned and fails with {@link
   *     KeyStoreException}
   * @param <T> the result type
   * @return the call
   * @throws IllegalArgumentException if the request's ttl is not longer than the guard's lease
   */
  public static <T> PendingCall<T> claim(
      IdempotencyGuard guard, IdempotencyRequest request, ResultCodec<T> codec, Duration maxWait) {
    Objects.requireNonNull(guard, "guard must not be null");
    Objects.requireNonNull(request, "request must not be null");
    Objects.requireNonNull(codec, "codec must not be null");
    Objects.requireNonNull(maxWait, "maxWait must not be null");
    PendingCall<T> call = new PendingCall<>(guard, request, codec);
    call.awaitDecision(maxWait);
    return call;
  }

  /** The sender: on whatever thread the guard calls it, hands the claim over to the caller. */
  private CompletableFuture<T> handOver(SendContext context) {
    if (!state.compareAndSet(State.WAITING, State.CLAIMED)) {
      // the caller gave up waiting: release the claim at once
      return CompletableFuture.failedFuture(
          new KeyStoreException("the caller stopped waiting for the claim", null));
    }
    Map<String, String> mdc = new HashMap<>();
    for (String name :
        new String[] {
          IdempotencyGuard.MDC_KEY, IdempotencyGuard.MDC_OPERATION, IdempotencyGuard.MDC_ATTEMPT
        }) {
      String value = MDC.get(name);
      if (value != null) {
        mdc.put(name, value);
      }
    }
    claimed.complete(new Claimed(context, mdc));
    return work;
  }

  private void awaitDecision(Duration maxWait) {
    // the guard's steps (after the store answered) run here meanwhile; a failed outcome (a refusal
    // without a send) is reported by outcome(); neither claimed nor answered in time: abandoned
    // below
    steps.runWhileWaiting(CompletableFuture.anyOf(claimed, outcome), maxWait, () -> {});
    if (claimed.isDone()) {
      claimedHere = true;
      return;
    }
    if (outcome.isDone()) {
      return;
    }
    if (state.compareAndSet(State.WAITING, State.ABANDONED)) {
      outcome.completeExceptionally(
          new KeyStoreException(
              "no answer from the idempotency guard within " + maxWait + "; nothing was run",
              null));
    } else {
      // claimed this very moment: hand the claim straight back
      claimed.join();
      fail(new KeyStoreException("the caller stopped waiting for the claim", null));
    }
  }

  /**
   * Whether this thread holds the claim and must run the work, then report it.
   *
   * @return {@code true} if claimed
   */
  public boolean claimed() {
    return claimedHere;
  }

  /**
   * The claim's context: the key, the provider keys and the attempt.
   *
   * @return the context
   * @throws IllegalStateException if the call was not claimed
   */
  public SendContext context() {
    if (!claimed()) {
      throw new IllegalStateException("the call was not claimed");
    }
    return claimed.join().context();
  }

  /**
   * Puts the guard's MDC entries of this call ({@link IdempotencyGuard#MDC_KEY} and the others, as
   * the guard set them for its sender) on this thread until the scope closes.
   *
   * @return the scope, restoring what the entries replaced
   */
  public Scope enter() {
    Map<String, String> entries = claimed() ? claimed.join().mdc() : Map.of();
    Map<String, @Nullable String> previous = new HashMap<>();
    entries.forEach(
        (name, value) -> {
          previous.put(name, MDC.get(name));
          MDC.put(name, value);
        });
    return () ->
        previous.forEach(
            (name, value) -> {
              if (value == null) {
                MDC.remove(name);
              } else {
                MDC.put(name, value);
              }
            });
  }

  /** The MDC entries of a call on the running thread; closing restores what they replaced. */
  @FunctionalInterface
  public interface Scope extends AutoCloseable {
    @Override
    void close();
  }

  /**
   * Reports the work's result: the guard records it (or, if too large for the store, records the
   * send without it) and completes {@link #outcome()}.
   *
   * @param value the result, may be null
   */
  public void complete(@Nullable T value) {
    work.complete(value);
  }

  /**
   * Reports that the work failed: the guard releases the key (or stores the failure, if its
   * classifier calls it permanent) and fails {@link #outcome()} with it.
   *
   * @param failure what the work threw
   */
  public void fail(Throwable failure) {
    work.completeExceptionally(Objects.requireNonNull(failure, "failure must not be null"));
  }

  /**
   * {@link #complete}, then waits until the outcome is written, at most {@code maxWait}; the
   * guard's steps of this call (encoding, the store's write) run on this thread meanwhile. Returns
   * early, with the interrupt flag set, if the thread is interrupted.
   *
   * @param value the result, may be null
   * @param maxWait the longest wait
   */
  public void completeAndAwait(@Nullable T value, Duration maxWait) {
    steps.runWhileWaiting(outcome, maxWait, () -> complete(value));
  }

  /**
   * {@link #fail}, then waits until the key is released (or the failure stored), at most {@code
   * maxWait}, as {@link #completeAndAwait} does.
   *
   * @param failure what the work threw
   * @param maxWait the longest wait
   */
  public void failAndAwait(Throwable failure, Duration maxWait) {
    Objects.requireNonNull(failure, "failure must not be null");
    steps.runWhileWaiting(outcome, maxWait, () -> fail(failure));
  }

  /**
   * Whether {@link #complete} or {@link #fail} was called (or the call was never claimed).
   *
   * @return {@code true} once nothing more is to be reported
   */
  public boolean reported() {
    return !claimed() || work.isDone();
  }

  /**
   * The call's outcome: a replay or a refusal when not claimed; else the recorded result, once the
   * work reported it and the guard wrote it. Fails as {@link
   * IdempotencyGuard#executeForOutcomeAsync} does.
   *
   * @return the outcome
   */
  public CompletableFuture<Outcome<T>> outcome() {
    return outcome;
  }

  /**
   * The failure of a completed stage without its {@link CompletionException} wrappers.
   *
   * @param error a stage's failure
   * @return the cause that matters
   */
  public static Throwable unwrap(Throwable error) {
    Throwable t = error;
    while ((t instanceof CompletionException || t instanceof ExecutionException)
        && t.getCause() != null) {
      t = t.getCause();
    }
    return t;
  }
}
