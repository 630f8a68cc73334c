package dev.idempotency;

import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * The claim of a {@link Batch}'s keys, and what it answered for the keys that are not sent: the
 * keys are checked (no null, no duplicate), those the near cache replays are not claimed, the rest
 * are claimed a chunk at a time, and each key's answer is decided ({@link CallSupport#decide}) into
 * an item to send, a replay, a refusal, or a key in flight. Used by the thread that builds the
 * batch only.
 */
final class BatchClaims<T> {

  final Map<String, Outcome<T>> replayed = new LinkedHashMap<>();
  final List<String> inFlight = new ArrayList<>();
  final Map<String, IdempotencyException> refused = new LinkedHashMap<>();

  private final GuardSettings settings;
  private final Batch<T> batch;

  BatchClaims(GuardSettings settings, Batch<T> batch) {
    this.settings = settings;
    this.batch = batch;
  }

  /**
   * The calls of {@code requests} that the store must claim, in order: those the near cache replays
   * are {@link #replayed} already.
   *
   * @throws IllegalArgumentException if a key is there twice
   */
  List<CallSupport<T>> toClaim(List<IdempotencyRequest> requests, ResultCodec<T> codec) {
    Map<String, CallSupport<T>> calls = new LinkedHashMap<>();
    for (IdempotencyRequest request : requests) {
      Objects.requireNonNull(request, "requests must not contain null");
      if (calls.put(request.key(), new CallSupport<>(settings, request, codec)) != null) {
        throw new IllegalArgumentException(
            "the batch has a duplicate key (digest " + Digests.keyId(request.key()) + ")");
      }
    }
    List<CallSupport<T>> all = new ArrayList<>(calls.size());
    for (CallSupport<T> call : calls.values()) {
      Outcome<T> cached = call.nearCacheReplay();
      if (cached != null) {
        replayed.put(call.request.key(), cached);
      } else {
        all.add(call);
      }
    }
    return all;
  }

  /**
   * Claims {@code chunk} in one store call (unless the breaker refuses it).
   *
   * @return the items to send, claimed or (fail-open) not; the other keys' answers are kept here
   */
  List<Batch.Item> claim(List<CallSupport<T>> chunk) {
    List<ClaimRequest> claims = new ArrayList<>(chunk.size());
    // one instant for the chunk, so that a store can claim it in one statement
    Instant now = settings.clock.instant();
    for (CallSupport<T> call : chunk) {
      claims.add(call.claimRequest(CallSupport.newOwnerToken(), now));
    }
    long askedAt = settings.leaseNow(now);
    long askedAtMono = GuardSettings.monoNow();
    List<ClaimResult> results = null;
    RuntimeException failure = settings.outages.refusal();
    if (failure == null) {
      try {
        results = settings.store.claimAll(claims);
      } catch (RuntimeException e) {
        failure = e;
      } catch (Error e) {
        settings.outages.claimAbandoned();
        throw e;
      }
    }
    List<Batch.Item> items = new ArrayList<>(chunk.size());
    for (int i = 0; i < chunk.size(); i++) {
      CallSupport<T> call = chunk.get(i);
      CallSupport.Next<T> next =
          call.decide(
              claims.get(i),
              askedAt,
              askedAtMono,
              results == null ? null : results.get(i),
              failure,
              false);
      String key = call.request.key();
      if (next instanceof CallSupport.Send<T> send) {
        items.add(new Batch.Item(batch, call, call.context(send.claim()), send.claim()));
      } else if (next instanceof CallSupport.SendUnclaimed<T>) {
        items.add(new Batch.Item(batch, call, call.context(1), null));
      } else if (next instanceof CallSupport.Replay<T> replay) {
        replayed.put(key, replay.outcome());
      } else if (next instanceof CallSupport.Refuse<T> refuse) {
        refused.put(key, (IdempotencyException) refuse.error());
      } else {
        inFlight.add(key);
      }
    }
    return items;
  }
}
