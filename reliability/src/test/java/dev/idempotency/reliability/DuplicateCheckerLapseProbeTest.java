package dev.idempotency.reliability;

import static dev.idempotency.reliability.HandWrittenHistories.history;
import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyKey;
import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.reliability.FaultHistory.Call;
import dev.idempotency.reliability.FaultHistory.Fault;
import dev.idempotency.reliability.FaultHistory.Send;
import dev.idempotency.reliability.FaultHistory.StoreCall;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.tck.ForwardingKeyStore;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Probes of the cause "owner's store answered after its lease" (faultdyn, 65e134f): histories with
 * a second send that no lapse of the owner's lease explains, which the checker must fail. A checker
 * that excuses too much hides a broken SPEC 1 promise in every fault run. Each "Seen" below is what
 * the checker before fixchecker's change did; it now excuses only the takeover's own send, with the
 * provider key compared, and a lapse only from a call that did not keep the lease as it stood when
 * the call returned.
 */
class DuplicateCheckerLapseProbeTest {

  private static final String KEY = "fault-key-189"; // a full window (189 % 5 != 0)
  private static final String KEY_ID = IdempotencyKey.digest(KEY);

  /** Process 0's claim of attempt 1: its renewal was unanswered when its lease ran out at 1,900. */
  private static final StoreCall LAPSE =
      new StoreCall("extend", 0, KEY_ID, 1, 1_200, 2_500, 1_900, false);

  /** Process 1 took that claim over as attempt 2, after the lease ran out. */
  private static final StoreCall TAKEOVER =
      new StoreCall("takeover", 1, KEY_ID, 2, 2_000, 2_050, 2_800, false);

  /**
   * The lapse is the takeover's excuse, and the takeover's alone: a third send, made after the
   * taker (a live owner that reached the store) recorded its outcome, is a second send of a
   * completed key with no cause, as if the two lapse lines were absent.
   *
   * <p>Was an open finding (probeY, 7 December 2026; fixed by fixchecker), severity: the checker
   * hides a second send (SPEC 1). Seen: {@code DuplicateChecker.check} reports the third send
   * (attempt 1 by process 2 at 4,100, 1.5 s after process 1's recorded send) as allowed, "owner's
   * store answered after its lease" 2, and no broken duplicate. Expected one broken duplicate.
   * {@code leaseRanOutUnanswered(earlier, later, ...)} asks only whether some takeover of the
   * earlier claim came before {@code later} began, not whether {@code later} is that takeover's
   * send (or a send the takeover's own fate explains), so once a key has lapsed once in a run every
   * later send of it is excused. The older causes share the shape (a kill of the first owner
   * excuses every later send of the key, see {@link
   * #aKilledOwnerExcusesNoSendAfterTheTakerRecorded}).
   */
  @Test
  void aLapsedLeaseExcusesNoSendAfterTheTakerRecorded() {
    FaultHistory history =
        history(
            List.of(
                new Send(KEY, "pk", 1, 0, 1_000, 3_000, "r-0-1"),
                new Send(KEY, "pk", 2, 1, 2_100, 2_200, "r-1-1"),
                new Send(KEY, "pk", 1, 2, 4_100, 4_150, "r-2-1")),
            List.of(
                new Call(KEY, "execute", 0, "SENT", "r-0-1", false, 3_050),
                new Call(KEY, "execute", 1, "SENT", "r-1-1", true, 2_300),
                new Call(KEY, "execute", 2, "SENT", "r-2-1", true, 4_200)),
            List.of(),
            LAPSE,
            TAKEOVER);

    DuplicateChecker.Report report = DuplicateChecker.check(history, List.of(), 0);

    assertThat(report.brokenDuplicates)
        .as("the send after the taker recorded: " + report)
        .singleElement()
        .asString()
        .contains("attempt 1 by process 2");
    assertThat(report.allowedDuplicates)
        .as("the takeover after the lapse")
        .containsEntry("owner's store answered after its lease", 1);
  }

  /**
   * The lapse excuses the taker's send, not a second send by the owner itself within its one claim
   * (attempt 1 twice by process 0, as a guard that sent again inside one claim would), when the
   * taker's own send failed (so it logged none).
   *
   * <p>Was an open finding (probeY, 7 December 2026; fixed by fixchecker), severity: the checker
   * hides a second send (SPEC 1). Seen: the owner's second send of attempt 1 is allowed as "owner's
   * store answered after its lease", no broken duplicate; expected one. The takeover of attempt 2
   * before the later send is all {@code leaseRanOutUnanswered} asks for: it does not ask that the
   * later send be of that attempt or later.
   */
  @Test
  void aLapsedLeaseExcusesNoSecondSendOfTheOwnersOwnClaim() {
    FaultHistory history =
        history(
            List.of(
                new Send(KEY, "pk", 1, 0, 1_000, 2_550, "r-0-1"),
                new Send(KEY, "pk", 1, 0, 2_600, 2_700, "r-0-2")),
            List.of(
                new Call(KEY, "execute", 0, "SENT", "r-0-1", false, 3_050),
                new Call(KEY, "execute", 1, "SEND_FAILED", null, false, 2_400),
                new Call(KEY, "execute", 0, "SENT", "r-0-2", false, 3_050)),
            List.of(),
            LAPSE,
            TAKEOVER);

    DuplicateChecker.Report report = DuplicateChecker.check(history, List.of(), 0);

    assertThat(report.brokenDuplicates)
        .as("the owner's second send in its own claim: " + report)
        .singleElement()
        .asString()
        .contains("attempt 1 by process 0");
  }

  /**
   * The same shape with the older cause "owner killed": the kill excuses the takeover, not a send
   * made after the taker recorded its outcome.
   *
   * <p>Was an open finding (probeY, 7 December 2026; fixed by fixchecker), severity: the checker
   * hides a second send (SPEC 1). Seen: the third send is allowed as "owner killed" (2 allowed,
   * none broken); expected one broken duplicate. {@code cause(earlier, later, ...)} takes a kill of
   * the earlier owner anywhere between its send and the later send's end, whoever held the key in
   * between.
   */
  @Test
  void aKilledOwnerExcusesNoSendAfterTheTakerRecorded() {
    FaultHistory history =
        history(
            List.of(
                new Send(KEY, "pk", 1, 0, 1_000, 1_500, "r-0-1"),
                new Send(KEY, "pk", 2, 1, 2_100, 2_200, "r-1-1"),
                new Send(KEY, "pk", 1, 2, 4_100, 4_150, "r-2-1")),
            List.of(
                new Call(KEY, "execute", 1, "SENT", "r-1-1", true, 2_300),
                new Call(KEY, "execute", 2, "SENT", "r-2-1", true, 4_200)),
            List.of(new Fault("KILL", 0, 1_200, 1_200)));

    DuplicateChecker.Report report = DuplicateChecker.check(history, List.of(), 0);

    assertThat(report.brokenDuplicates)
        .as("the send after the taker recorded: " + report)
        .singleElement()
        .asString()
        .contains("attempt 1 by process 2");
    assertThat(report.allowedDuplicates).containsEntry("owner killed", 1);
  }

  /**
   * A repeat with another provider key is never allowed (the provider cannot absorb it), as {@code
   * DuplicateCheckerTest.aRepeatWithAnotherProviderKeyIsNeverAllowed} checks for a kill.
   *
   * <p>Was an open finding (probeY, 7 December 2026; fixed by fixchecker), severity: the checker
   * hides a second send (SPEC 1): a takeover whose send carries another provider key than the
   * owner's is a second send the provider cannot absorb, and a guard that changed its provider key
   * on takeover would pass the fault run. Seen: allowed as "owner's store answered after its
   * lease", no broken duplicate; expected one. {@code leaseRanOutUnanswered} does not compare
   * provider keys; {@code cause} does.
   */
  @Test
  void aLapsedLeaseExcusesNoRepeatWithAnotherProviderKey() {
    FaultHistory history =
        history(
            List.of(
                new Send(KEY, "pk", 1, 0, 1_000, 3_000, "r-0-1"),
                new Send(KEY, "other", 2, 1, 2_100, 2_200, "r-1-1")),
            List.of(
                new Call(KEY, "execute", 0, "SENT", "r-0-1", false, 3_050),
                new Call(KEY, "execute", 1, "SENT", "r-1-1", true, 2_300)),
            List.of(),
            LAPSE,
            TAKEOVER);

    DuplicateChecker.Report report = DuplicateChecker.check(history, List.of(), 0);

    assertThat(report.brokenDuplicates).as(report.toString()).hasSize(1);
  }

  /**
   * A renewal the store granted, however late its answer came, kept the lease from the time it was
   * asked: a takeover asked for before that renewed lease ended took a live lease (a broken store)
   * and excuses nothing ("a takeover asked for while the lease still ran ... excuses nothing",
   * docs/guarantees.md). Drives the real {@link StoreCallLog} over the in-memory store: the claim's
   * renewal is granted at once by the store and answered to the client after the claim's first
   * lease ran out; the store, asked at the takeover's time, refuses it (the lease is live).
   *
   * <p>Was an open finding (probeY, 7 December 2026; fixed by fixchecker), severity: the checker
   * hides a second send (SPEC 1), one a store that grants a takeover of a live lease makes, on a
   * host slow enough that a granted renewal's answer comes after the old lease. Seen: the {@code
   * extend} line {@link StoreCallLog} writes is the same whether the store granted the renewal or
   * not (its answer is not logged, and its lease end is the one before the renewal), so the checker
   * allows the takeover as "owner's store answered after its lease"; expected one broken duplicate.
   */
  @Test
  void aRenewalTheStoreGrantedLateExcusesNoTakeoverOfTheLeaseItRenewed(@TempDir Path dir)
      throws Exception {
    long lease = 400;
    InMemoryKeyStore memory = InMemoryKeyStore.builder().build();
    long[] extendAskedAt = new long[1];
    long[] firstLeaseEnd = new long[1];
    ForwardingKeyStore lateAnswers =
        new ForwardingKeyStore(memory) {
          @Override
          public boolean extend(ExtendRequest request) {
            boolean granted = delegate.extend(request);
            // the answer comes back after the first lease ran out (bounded: the true clock moves)
            long deadline = System.currentTimeMillis() + 10_000;
            while (System.currentTimeMillis() <= firstLeaseEnd[0] + 20
                && System.currentTimeMillis() < deadline) {
              sleepBriefly();
            }
            return granted;
          }
        };
    Path log = dir.resolve("store-0.log");
    try (FileChannel channel =
        FileChannel.open(log, StandardOpenOption.CREATE, StandardOpenOption.WRITE)) {
      StoreCallLog store = new StoreCallLog(lateAnswers, 0, lease, channel);
      long claimedAt = System.currentTimeMillis();
      ClaimResult claimed =
          store.claim(
              new ClaimRequest(
                  KEY_ID,
                  "owner-0",
                  "fingerprint",
                  Instant.ofEpochMilli(claimedAt),
                  Duration.ofMillis(lease),
                  Duration.ofHours(1),
                  true,
                  null));
      assertThat(claimed).isInstanceOf(ClaimResult.Claimed.class);
      // no earlier than the lease end the log counts (from the claim call's start)
      firstLeaseEnd[0] = System.currentTimeMillis() + lease;
      // the keeper renews half a lease in
      long deadline = System.currentTimeMillis() + 10_000;
      while (System.currentTimeMillis() < claimedAt + lease / 2
          && System.currentTimeMillis() < deadline) {
        sleepBriefly();
      }
      extendAskedAt[0] = System.currentTimeMillis();
      assertThat(
              store.extend(
                  new ExtendRequest(
                      KEY_ID,
                      "owner-0",
                      Duration.ofMillis(lease),
                      Instant.ofEpochMilli(extendAskedAt[0]))))
          .as("the store granted the renewal")
          .isTrue();
    }
    FaultHistory history = FaultHistory.read(dir);
    // the claim is logged too when it took a quarter lease (a loaded host): only the renewal counts
    List<StoreCall> renewals =
        history.storeCalls.stream().filter(call -> call.operation().equals("extend")).toList();
    assertThat(renewals)
        .as("the line the client logged for the granted renewal: " + history.storeCalls)
        .singleElement()
        .satisfies(call -> assertThat(call.leaseRanOutUnanswered()).isTrue());
    long loggedLeaseEnd = renewals.get(0).leaseUntilMillis();
    long takeoverAt = loggedLeaseEnd + 10;
    assertThat(takeoverAt).isLessThan(extendAskedAt[0] + lease);
    ClaimResult taker =
        memory.claim(
            new ClaimRequest(
                KEY_ID,
                "owner-1",
                "fingerprint",
                Instant.ofEpochMilli(takeoverAt),
                Duration.ofMillis(lease),
                Duration.ofHours(1),
                true,
                null));
    assertThat(taker)
        .as("the store refuses a takeover at that time: the renewed lease is live")
        .isInstanceOf(ClaimResult.Existing.class);

    long sendStart = loggedLeaseEnd - lease + 50;
    history.sends.addAll(
        List.of(
            new Send(KEY, "pk", 1, 0, sendStart, takeoverAt + 2_000, "r-0-1"),
            new Send(KEY, "pk", 2, 1, takeoverAt + 100, takeoverAt + 150, "r-1-1")));
    history.calls.addAll(
        List.of(
            new Call(KEY, "execute", 0, "SENT", "r-0-1", false, takeoverAt + 2_050),
            new Call(KEY, "execute", 1, "SENT", "r-1-1", true, takeoverAt + 200)));
    // a store that granted the takeover anyway (the one the real store refused above)
    history.storeCalls.add(
        new StoreCall(
            "takeover", 1, KEY_ID, 2, takeoverAt, takeoverAt + 50, takeoverAt + lease, false));

    DuplicateChecker.Report report = DuplicateChecker.check(history, List.of(), 0);

    assertThat(report.brokenDuplicates)
        .as("a takeover of a lease the store had renewed: " + report)
        .hasSize(1);
  }

  /**
   * Guards what holds: with no store call of the owner's claim at all, or only lines of other keys,
   * the same takeover is a broken duplicate; and a lapse on one key excuses nothing on another.
   */
  @Test
  void aLapseExcusesNothingWithoutItsOwnLines() {
    String otherKey = "fault-key-191";
    String otherId = IdempotencyKey.digest(otherKey);
    List<Send> sends =
        List.of(
            new Send(KEY, "pk", 1, 0, 1_000, 3_000, "r-0-1"),
            new Send(KEY, "pk", 2, 1, 2_100, 2_200, "r-1-1"),
            new Send(otherKey, "pk", 1, 0, 1_000, 3_000, "r-0-2"),
            new Send(otherKey, "pk", 2, 1, 2_100, 2_200, "r-1-2"));
    List<Call> calls =
        List.of(
            new Call(KEY, "execute", 0, "SENT", "r-0-1", false, 3_050),
            new Call(KEY, "execute", 1, "SENT", "r-1-1", true, 2_300),
            new Call(otherKey, "execute", 0, "SENT", "r-0-2", false, 3_050),
            new Call(otherKey, "execute", 1, "SENT", "r-1-2", true, 2_300));

    DuplicateChecker.Report report =
        DuplicateChecker.check(history(sends, calls, List.of(), LAPSE, TAKEOVER), List.of(), 0);
    assertThat(report.allowedDuplicates).containsEntry("owner's store answered after its lease", 1);
    assertThat(report.brokenDuplicates).singleElement().asString().startsWith(otherKey + ":");

    DuplicateChecker.Report onlyOther =
        DuplicateChecker.check(
            history(
                sends,
                calls,
                List.of(),
                new StoreCall("extend", 0, otherId, 1, 1_200, 1_850, 1_900, false),
                new StoreCall("takeover", 1, otherId, 2, 2_000, 2_050, 2_800, false)),
            List.of(),
            0);
    assertThat(onlyOther.brokenDuplicates).as("a renewal answered in time").hasSize(2);
  }

  private static void sleepBriefly() {
    try {
      Thread.sleep(5);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError(e);
    }
  }
}
