package dev.idempotency.tck;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spi.StoredRecord;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.api.Test;

/**
 * Races of {@link dev.idempotency.spi.KeyStore#takeBack} (issue 37) against the other writes that
 * can reach the store at the same moment, on many keys at once, each key's writes released together
 * on their own threads: a renewal ({@code extend}, {@code extendAll}) and a completion under the
 * very token taken back, and a third caller's claim or takeover. Whatever order the store applies
 * them in, a take-back never lets two claims own a key, never erases a completed outcome, never
 * leaves a takeover with a live lease under a token nobody holds, and a first attempt taken back
 * leaves the key free. Not part of {@link KeyStoreContract}; a store's test extends it.
 */
public abstract class TakeBackRaceProbe extends StoreContractSupport {

  /** Keys raced at once in each test. */
  protected static final int KEYS = 12;

  /** One key held under one owner token. */
  protected record Held(String keyId, String token) {}

  /** A gate, and the time the store sees once every takeover lease below has been claimed. */
  private Instant afterTakeover;

  /**
   * Creates {@link #KEYS} keys, each claimed once with an expiring lease and then taken over
   * (attempt 2) under its own token with {@code takeoverLease}.
   */
  private List<Held> takeovers(Duration takeoverLease) {
    Duration lease = expiringLease();
    Duration retention = expiringRetention().plus(LONG_LEASE).plus(LONG_LEASE);
    List<Held> held = new ArrayList<>();
    for (int i = 0; i < KEYS; i++) {
      String keyId = newKeyId();
      assertThat(store().claim(claim(keyId, newToken(), lease, retention)))
          .isEqualTo(new ClaimResult.Claimed(1, false));
      held.add(new Held(keyId, newToken()));
    }
    for (Held h : held) {
      ClaimRequest takeover = claim(h.keyId(), h.token(), takeoverLease, retention);
      assertThat(claimAfter(takeover, lease.plusMillis(1), StoreContractSupport::isClaimed))
          .isEqualTo(new ClaimResult.Claimed(2, true));
    }
    afterTakeover = serverTime() ? Instant.now() : T0.plus(lease).plusMillis(1);
    return held;
  }

  /** The store's now for a request made after the takeovers and {@code elapsed} more. */
  private Instant nowAfterTakeover(Duration elapsed) {
    return serverTime() ? Instant.now() : afterTakeover.plus(elapsed);
  }

  /** Reads the record with a strict claim, which never changes it. */
  private ClaimResult.Existing strictRead(String keyId, Instant now) {
    ClaimResult result =
        store()
            .claim(
                new ClaimRequest(
                    keyId, newToken(), "", now, LONG_LEASE, LONG_RETENTION, false, null));
    assertThat(result).as("strict read of %s", keyId).isInstanceOf(ClaimResult.Existing.class);
    return (ClaimResult.Existing) result;
  }

  /**
   * A takeover's take-back raced by a renewal and a batch renewal under its own token: in any
   * order, the record ends in progress at attempt 2 with a passed lease, the old token renews
   * nothing after it, and the next claim takes over as attempt 3.
   */
  @Test
  public void aTakeoverTakeBackRacingItsOwnRenewalsEndsLapsedInAnyOrder() throws Exception {
    List<Held> held = takeovers(LONG_LEASE);
    Instant now = nowAfterTakeover(Duration.ZERO);
    CountDownLatch start = new CountDownLatch(1);
    List<Callable<Boolean>> tasks = new ArrayList<>();
    for (Held h : held) {
      tasks.add(gated(start, () -> store().takeBack(h.keyId(), h.token(), now)));
      tasks.add(gated(start, () -> store().extend(extend(h.keyId(), h.token(), LONG_LEASE, now))));
      tasks.add(
          gated(
              start,
              () ->
                  store()
                      .extendAll(List.of(extend(h.keyId(), h.token(), LONG_LEASE, now)))
                      .get(0)));
    }
    List<Boolean> results = runAll(tasks, start);

    Instant after = nowAfterTakeover(Duration.ofMillis(1));
    for (int i = 0; i < held.size(); i++) {
      Held h = held.get(i);
      assertThat(results.get(3 * i)).as("the take-back of %s", h.keyId()).isTrue();
      ClaimResult.Existing left = strictRead(h.keyId(), after);
      assertThat(left.record().state()).isEqualTo(RecordState.IN_PROGRESS);
      assertThat(left.record().attempt()).isEqualTo(2);
      assertThat(left.leaseExpired())
          .as(
              "key %s: the take-back raced renewals (extend %s, extendAll %s): its lease passed",
              h.keyId(), results.get(3 * i + 1), results.get(3 * i + 2))
          .isTrue();
      assertThat(store().extend(extend(h.keyId(), h.token(), LONG_LEASE, after)))
          .as("a renewal after the take-back")
          .isFalse();
      assertThat(store().claim(claim(h.keyId(), newToken()).withNow(after)))
          .as("the next claim of %s", h.keyId())
          .isEqualTo(new ClaimResult.Claimed(3, true));
    }
  }

  /**
   * A takeover whose own lease lapsed, taken back while a third caller takes it over: in either
   * order the third caller gets attempt 3 with a live lease that the take-back leaves alone.
   */
  @Test
  public void aLapsedTakeoverTakenBackWhileAThirdCallerTakesItOver() throws Exception {
    Duration shortLease = expiringLease();
    List<Held> held = takeovers(shortLease);
    long lapsedFrom = System.nanoTime();
    if (serverTime()) {
      awaitElapsed(lapsedFrom, shortLease.plusMillis(50));
    }
    Instant now = nowAfterTakeover(shortLease.plusMillis(1));
    CountDownLatch start = new CountDownLatch(1);
    List<Callable<Object>> tasks = new ArrayList<>();
    List<String> thirdTokens = new ArrayList<>();
    for (Held h : held) {
      String third = newToken();
      thirdTokens.add(third);
      tasks.add(gated(start, () -> store().takeBack(h.keyId(), h.token(), now)));
      tasks.add(gated(start, () -> store().claim(claim(h.keyId(), third).withNow(now))));
    }
    List<Object> results = runAll(tasks, start);

    Instant after = serverTime() ? Instant.now() : now.plusMillis(1);
    for (int i = 0; i < held.size(); i++) {
      Held h = held.get(i);
      Object takenBack = results.get(2 * i);
      assertThat(results.get(2 * i + 1))
          .as("the third caller's claim of %s (take-back: %s)", h.keyId(), takenBack)
          .isEqualTo(new ClaimResult.Claimed(3, true));
      ClaimResult.Existing left = strictRead(h.keyId(), after);
      assertThat(left.record().attempt()).isEqualTo(3);
      assertThat(left.leaseExpired())
          .as("the third caller's lease on %s (take-back: %s)", h.keyId(), takenBack)
          .isFalse();
      assertThat(store().extend(extend(h.keyId(), thirdTokens.get(i), LONG_LEASE, after)))
          .as("the third caller still owns %s", h.keyId())
          .isTrue();
    }
  }

  /**
   * A take-back raced by a completion under the same token (first attempts and takeovers): exactly
   * one of them applies, and a completion that applied is never erased or rewound.
   */
  @Test
  public void aTakeBackRacingACompletionNeverErasesTheOutcome() throws Exception {
    Duration retention = expiringRetention().plus(LONG_LEASE).plus(LONG_LEASE);
    List<Held> firsts = new ArrayList<>();
    for (int i = 0; i < KEYS; i++) {
      Held h = new Held(newKeyId(), newToken());
      assertThat(store().claim(claim(h.keyId(), h.token(), LONG_LEASE, retention)))
          .isEqualTo(new ClaimResult.Claimed(1, false));
      firsts.add(h);
    }
    List<Held> takeovers = takeovers(LONG_LEASE);
    Instant now = nowAfterTakeover(Duration.ZERO);
    List<Held> all = new ArrayList<>(firsts);
    all.addAll(takeovers);
    CountDownLatch start = new CountDownLatch(1);
    List<Callable<Boolean>> tasks = new ArrayList<>();
    for (Held h : all) {
      tasks.add(gated(start, () -> store().takeBack(h.keyId(), h.token(), now)));
      tasks.add(
          gated(start, () -> store().complete(complete(h.keyId(), h.token(), bytes("sent")))));
    }
    List<Boolean> results = runAll(tasks, start);

    Instant after = nowAfterTakeover(Duration.ofMillis(1));
    for (int i = 0; i < all.size(); i++) {
      Held h = all.get(i);
      boolean takenBack = results.get(2 * i);
      boolean completed = results.get(2 * i + 1);
      boolean first = i < firsts.size();
      assertThat(takenBack ^ completed)
          .as(
              "key %s (attempt %d): take-back %s, complete %s",
              h.keyId(), first ? 1 : 2, takenBack, completed)
          .isTrue();
      if (completed) {
        StoredRecord record = strictRead(h.keyId(), after).record();
        assertThat(record.state()).as("completed %s", h.keyId()).isEqualTo(RecordState.COMPLETED);
        assertThat(record.payload()).isEqualTo(bytes("sent"));
      } else {
        assertThat(store().claim(claim(h.keyId(), newToken()).withNow(after)))
            .as("the next claim of %s, taken back", h.keyId())
            .isEqualTo(
                first ? new ClaimResult.Claimed(1, false) : new ClaimResult.Claimed(3, true));
      }
    }
  }

  /**
   * A first attempt taken back while its own renewal and a second caller's claim race it: the
   * second caller either finds the claim in progress or claims afresh; once it claimed, the old
   * token's renewal never lands on its record, and the key has exactly one owner.
   */
  @Test
  public void aFirstAttemptTakeBackRacingItsRenewalAndANewClaim() throws Exception {
    List<Held> held = new ArrayList<>();
    for (int i = 0; i < KEYS; i++) {
      Held h = new Held(newKeyId(), newToken());
      assertThat(store().claim(claim(h.keyId(), h.token())))
          .isEqualTo(new ClaimResult.Claimed(1, false));
      held.add(h);
    }
    Instant now = requestNow(Duration.ofSeconds(1));
    CountDownLatch start = new CountDownLatch(1);
    List<Callable<Object>> tasks = new ArrayList<>();
    List<String> seconds = new ArrayList<>();
    for (Held h : held) {
      String second = newToken();
      seconds.add(second);
      tasks.add(gated(start, () -> store().takeBack(h.keyId(), h.token(), now)));
      tasks.add(gated(start, () -> store().extend(extend(h.keyId(), h.token(), LONG_LEASE, now))));
      tasks.add(gated(start, () -> store().claim(claim(h.keyId(), second).withNow(now))));
    }
    List<Object> results = runAll(tasks, start);

    Instant after = requestNow(Duration.ofSeconds(2));
    for (int i = 0; i < held.size(); i++) {
      Held h = held.get(i);
      assertThat(results.get(3 * i)).as("the take-back of %s", h.keyId()).isEqualTo(true);
      Object second = results.get(3 * i + 2);
      assertThat(store().extend(extend(h.keyId(), h.token(), LONG_LEASE, after)))
          .as("the old token after the take-back")
          .isFalse();
      if (second instanceof ClaimResult.Claimed) {
        assertThat(second).isEqualTo(new ClaimResult.Claimed(1, false));
        ClaimResult.Existing left = strictRead(h.keyId(), after);
        assertThat(left.leaseExpired()).as("the second caller's lease").isFalse();
        assertThat(store().extend(extend(h.keyId(), seconds.get(i), LONG_LEASE, after)))
            .as("the second caller owns %s", h.keyId())
            .isTrue();
      } else {
        assertThat(existing((ClaimResult) second).attempt()).isEqualTo(1);
        assertThat(store().claim(claim(h.keyId(), newToken()).withNow(after)))
            .as(
                "the key %s is free after the take-back (renewal: %s)",
                h.keyId(), results.get(3 * i + 1))
            .isEqualTo(new ClaimResult.Claimed(1, false));
      }
    }
  }

  /** A task that waits for the gate, then runs. */
  private static <R> Callable<R> gated(CountDownLatch start, Callable<R> task) {
    return () -> {
      start.await();
      return task.call();
    };
  }
}
