package dev.idempotency.reliability;

import static dev.idempotency.reliability.HandWrittenHistories.history;
import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.reliability.FaultHistory.Call;
import dev.idempotency.reliability.FaultHistory.Fault;
import dev.idempotency.reliability.FaultHistory.Send;
import dev.idempotency.reliability.FaultHistory.StoreCall;
import java.util.List;
import org.junit.jupiter.api.Test;

class DuplicateCheckerTest {

  @Test
  void oneSendPerKeyWithItsReplaysPasses() {
    DuplicateChecker.Report report =
        DuplicateChecker.check(
            history(
                List.of(new Send("k", "pk", 1, 0, 90, 100, "r-0-1")),
                List.of(
                    new Call("k", "execute", 0, "SENT", "r-0-1", true, 0),
                    new Call("k", "batch", 1, "REPLAYED", "r-0-1", true, 0)),
                List.of()),
            List.of(),
            0);

    assertThat(report.ok()).isTrue();
    assertThat(report.sends).isEqualTo(1);
    assertThat(report.replays).isEqualTo(1);
  }

  /**
   * A short-window key sent again after its window is fine; sent again while an earlier send was
   * still running (its record lost under a live owner) is not, whatever older sends there were.
   */
  @Test
  void aShortWindowExcusesOnlyASendAfterEveryEarlierOneReturned() {
    String shortKey = FaultRunChild.keyName(10);
    FaultHistory history =
        history(
            List.of(
                new Send(shortKey, "pk", 1, 0, 0, 100, "a"),
                new Send(shortKey, "pk", 1, 1, 2_000, 4_000, "b"),
                new Send(shortKey, "pk", 1, 2, 3_500, 3_600, "c")),
            List.of(),
            List.of());

    DuplicateChecker.Report report = DuplicateChecker.check(history, List.of(), 0);

    assertThat(FaultRunChild.isShortWindow(shortKey)).isTrue();
    assertThat(report.allowedDuplicates).containsEntry("window ended", 1);
    assertThat(report.brokenDuplicates)
        .as("the third began while the second was still sending")
        .singleElement()
        .asString()
        .contains("attempt 1 by process 2");
  }

  /**
   * A process whose clock ran ahead may take a live owner's key over (clock skew on a client-time
   * store), also when its send starts before the owner's, or claim it afresh, its clock past the
   * record's window; but an owner whose clock ran ahead must never be taken over.
   */
  @Test
  void aClockAheadExcusesTheTakeoverNeverTheOwnerTakenOver() {
    FaultHistory history =
        history(
            List.of(
                new Send("ahead-taker", "pk1", 1, 1, 100, 2_000, "a"),
                new Send("ahead-taker", "pk1", 2, 2, 500, 600, "b"),
                new Send("ahead-taker-first", "pk3", 2, 2, 90, 95, "e"),
                new Send("ahead-taker-first", "pk3", 1, 1, 100, 200, "f"),
                new Send("ahead-owner", "pk2", 1, 2, 100, 2_000, "c"),
                new Send("ahead-owner", "pk2", 2, 1, 1_500, 1_600, "d"),
                new Send("ahead-fresh", "pk4", 1, 1, 100, 2_000, "g"),
                new Send("ahead-fresh", "pk4", 1, 2, 300, 400, "h"),
                new Send(FaultRunChild.keyName(15), "pk5", 1, 2, 100, 110, "i"),
                new Send(FaultRunChild.keyName(15), "pk5", 1, 1, 101, 120, "j")),
            List.of(),
            List.of(new Fault("CLOCK_AHEAD", 2, 50, 1_000)));

    DuplicateChecker.Report report = DuplicateChecker.check(history, List.of(), 0);

    assertThat(report.allowedDuplicates).containsEntry("taker's clock ahead", 4);
    assertThat(report.brokenDuplicates).singleElement().asString().startsWith("ahead-owner");
  }

  /**
   * A process whose clock ran ahead took the key from a live owner, its own send failed and it
   * released the key, and a third claimed it afresh: clock skew too, though the two that sent were
   * not ahead. Without the clock ahead, the same history is broken.
   */
  @Test
  void aReleaseByAnOwnerWhoseClockRanAheadExcusesTheFreshClaimAfterIt() {
    List<Send> sends =
        List.of(
            new Send("k", "pk", 1, 2, 100, 150, "a"), new Send("k", "pk", 1, 3, 300, 2_000, "b"));
    List<Call> calls = List.of(new Call("k", "batch", 0, "SEND_FAILED", null, false, 200));

    DuplicateChecker.Report ahead =
        DuplicateChecker.check(
            history(sends, calls, List.of(new Fault("CLOCK_AHEAD", 0, 50, 1_000))), List.of(), 0);
    DuplicateChecker.Report notAhead =
        DuplicateChecker.check(history(sends, calls, List.of()), List.of(), 0);

    assertThat(ahead.allowedDuplicates).containsEntry("taker's clock ahead", 1);
    assertThat(notAhead.brokenDuplicates).hasSize(1);
  }

  /**
   * Seed 17 on PostgreSQL with client time (fault-key-124): process 1's batch claimed the key and
   * sent it later; in between, process 0, its clock ahead, took the key over (its WARN at 526), its
   * send failed (logged at 535) and it released the key, and process 2 claimed it afresh. Both sent
   * as attempt 1, both after the release, and process 1's outcome, fenced, was refused. The release
   * before both sends is the clock skew's, but only with that refusal: without it (both outcomes
   * recorded) nothing says the first claim was taken, and the history stays broken.
   */
  @Test
  void aReleaseByAnOwnerAheadBeforeBothSendsExcusesThemWhenTheTakenOwnerWasRefused() {
    List<Send> sends =
        List.of(
            new Send("fault-key-124", "pk", 1, 1, 674_537, 674_546, "r-1-53"),
            new Send("fault-key-124", "pk", 1, 2, 674_543, 674_557, "r-2-32"));
    Call aheadFailed = new Call("fault-key-124", "batch", 0, "SEND_FAILED", null, false, 674_535);
    Call secondRecorded = new Call("fault-key-124", "batch", 2, "SENT", "r-2-32", true, 674_558);
    List<Fault> faults = List.of(new Fault("CLOCK_AHEAD", 0, 674_421, 675_911));

    DuplicateChecker.Report refused =
        DuplicateChecker.check(
            history(
                sends,
                List.of(
                    aheadFailed,
                    new Call("fault-key-124", "batch", 1, "SENT", "r-1-53", false, 674_549),
                    secondRecorded),
                faults),
            List.of(),
            0);
    DuplicateChecker.Report bothRecorded =
        DuplicateChecker.check(
            history(
                sends,
                List.of(
                    aheadFailed,
                    new Call("fault-key-124", "batch", 1, "SENT", "r-1-53", true, 674_549),
                    secondRecorded),
                faults),
            List.of(),
            0);
    DuplicateChecker.Report releasedAfterBoth =
        DuplicateChecker.check(
            history(
                sends,
                List.of(
                    new Call("fault-key-124", "batch", 0, "SEND_FAILED", null, false, 674_560),
                    new Call("fault-key-124", "batch", 1, "SENT", "r-1-53", false, 674_549),
                    secondRecorded),
                faults),
            List.of(),
            0);

    assertThat(refused.brokenDuplicates).isEmpty();
    assertThat(refused.allowedDuplicates).containsEntry("taker's clock ahead", 1);
    assertThat(bothRecorded.brokenDuplicates).as("no owner was refused").hasSize(1);
    assertThat(releasedAfterBoth.brokenDuplicates)
        .as("a release after both sends began let neither claim")
        .hasSize(1);
  }

  @Test
  void aSecondSendWhileTheOwnerLivedAndRecordedIsBroken() {
    DuplicateChecker.Report report =
        DuplicateChecker.check(
            history(
                List.of(
                    new Send("k", "pk", 1, 0, 90, 100, "r-0-1"),
                    new Send("k", "pk", 2, 1, 890, 900, "r-1-1")),
                List.of(new Call("k", "execute", 0, "SENT", "r-0-1", true, 0)),
                List.of()),
            List.of(),
            0);

    assertThat(report.ok()).isFalse();
    assertThat(report.brokenDuplicates).singleElement().asString().startsWith("k: ");
  }

  @Test
  void aTakeoverAfterTheOwnerWasKilledPausedOrCouldNotRecordIsAllowed() {
    DuplicateChecker.Report report =
        DuplicateChecker.check(
            history(
                List.of(
                    new Send("killed", "pk1", 1, 0, 90, 100, "a"),
                    new Send("killed", "pk1", 2, 1, 1990, 2_000, "b"),
                    new Send("paused", "pk2", 1, 2, 90, 100, "c"),
                    new Send("paused", "pk2", 2, 1, 2990, 3_000, "d"),
                    new Send("unrecorded", "pk3", 1, 3, 90, 100, "e"),
                    new Send("unrecorded", "pk3", 2, 1, 2990, 3_000, "f")),
                List.of(new Call("unrecorded", "async", 3, "SENT", "e", false, 0)),
                List.of(
                    new Fault("KILL", 0, 500, 500),
                    new Fault("PAUSE", 2, 50, 2_500),
                    new Fault("STORE_RESTART", -1, 95, 1_500))),
            List.of(),
            0);

    assertThat(report.ok()).isTrue();
    assertThat(report.allowedDuplicates)
        .containsEntry("owner killed", 1)
        .containsEntry("owner paused", 1)
        .containsEntry("owner cut off from the store", 1);
  }

  /**
   * Seen in a long run: an owner paused between its claim and its send; another process took the
   * key over and sent; the owner woke and sent too, later, with the same provider key.
   */
  @Test
  void anOwnerPausedBeforeItsSendThatSendsAfterTheTakeoverIsAllowed() {
    List<Send> sends =
        List.of(
            new Send("k", "pk", 2, 7, 2_689, 2_700, "takeover"),
            new Send("k", "pk", 1, 5, 3_570, 3_580, "woke"));
    DuplicateChecker.Report paused =
        DuplicateChecker.check(
            history(sends, List.of(), List.of(new Fault("PAUSE", 5, 1_855, 3_557))), List.of(), 0);
    DuplicateChecker.Report notPaused =
        DuplicateChecker.check(
            history(sends, List.of(), List.of(new Fault("PAUSE", 6, 1_855, 3_557))), List.of(), 0);

    assertThat(paused.ok()).isTrue();
    assertThat(paused.allowedDuplicates).containsEntry("owner paused", 1);
    assertThat(notPaused.brokenDuplicates).hasSize(1);
  }

  /** The broken build's signature: a live, connected owner's slow send taken over. */
  @Test
  void anOutcomeNotRecordedWithoutAStoreFaultIsBroken() {
    DuplicateChecker.Report report =
        DuplicateChecker.check(
            history(
                List.of(
                    new Send("k", "pk", 1, 0, 100, 1_900, "slow"),
                    new Send("k", "pk", 2, 1, 1_000, 1_050, "taken-over")),
                List.of(new Call("k", "execute", 0, "SENT", "slow", false, 1_950)),
                List.of(new Fault("PARTITION", -1, 5_000, 6_000))),
            List.of(),
            0);

    assertThat(report.brokenDuplicates).hasSize(1);
  }

  /**
   * A batch's owner cut off for longer than a lease, then killed before its batch logged anything:
   * the cut alone excuses the takeover (no renewal got through it). A shorter cut does not.
   */
  @Test
  void aCutLongerThanALeaseExcusesATakeoverWithoutTheOwnersLogAndAShorterOneDoesNot() {
    List<Send> sends =
        List.of(
            new Send("k", "pk", 1, 5, 100, 130, "first"),
            new Send("k", "pk", 2, 7, 1_950, 1_960, "taken-over"));
    List<Call> calls = List.of(new Call("k", "execute", 7, "SENT", "taken-over", true, 1_970));

    DuplicateChecker.Report longCut =
        DuplicateChecker.check(
            history(sends, calls, List.of(new Fault("PARTITION", -1, 130, 1_800))), List.of(), 0);
    DuplicateChecker.Report shortCut =
        DuplicateChecker.check(
            history(sends, calls, List.of(new Fault("PARTITION", -1, 130, 600))), List.of(), 0);

    assertThat(longCut.ok()).isTrue();
    assertThat(longCut.allowedDuplicates).containsEntry("owner cut off from the store", 1);
    assertThat(shortCut.brokenDuplicates).hasSize(1);
  }

  /**
   * The nemesis logs a kill just before it signals: a send the doomed process began a few
   * milliseconds after that line is still the killed owner's. A send a second after it is not.
   */
  @Test
  void aSendBegunAsTheKillLandedIsTheKilledOwnersAndOneLongAfterIsNot() {
    DuplicateChecker.Report asItLanded = takenOverAfterAKillAt(1_000, 1_009, 1_023, 2_100);
    DuplicateChecker.Report longAfter = takenOverAfterAKillAt(1_000, 2_000, 2_010, 3_100);

    assertThat(asItLanded.ok()).isTrue();
    assertThat(asItLanded.allowedDuplicates).containsEntry("owner killed", 1);
    assertThat(longAfter.brokenDuplicates).hasSize(1);
  }

  /** Process 1 sends from firstStart to firstEnd, killed at killAt; process 2 takes over. */
  private static DuplicateChecker.Report takenOverAfterAKillAt(
      long killAt, long firstStart, long firstEnd, long takeoverStart) {
    return DuplicateChecker.check(
        history(
            List.of(
                new Send("k", "pk", 1, 1, firstStart, firstEnd, "first"),
                new Send("k", "pk", 2, 2, takeoverStart, takeoverStart + 10, "taken-over")),
            List.of(new Call("k", "async", 2, "SENT", "taken-over", true, takeoverStart + 20)),
            List.of(new Fault("KILL", 1, killAt, killAt))),
        List.of(),
        0);
  }

  @Test
  void aSlowFirstSendLoggedAfterTheTakeoverIsOrderedByItsStart() {
    DuplicateChecker.Report report =
        DuplicateChecker.check(
            history(
                List.of(
                    new Send("k", "pk", 2, 2, 1_500, 1_600, "taken-over"),
                    new Send("k", "pk", 1, 3, 100, 1_700, "slow")),
                List.of(new Call("k", "batch", 3, "SENT", "slow", false, 1_750)),
                List.of(new Fault("PARTITION", -1, 200, 1_400))),
            List.of(),
            0);

    assertThat(report.ok()).isTrue();
    assertThat(report.allowedDuplicates).containsEntry("owner cut off from the store", 1);
  }

  @Test
  void aRepeatWithAnotherProviderKeyIsNeverAllowed() {
    DuplicateChecker.Report report =
        DuplicateChecker.check(
            history(
                List.of(
                    new Send("k1", "pk", 1, 0, 90, 100, "a"),
                    new Send("k1", "other", 2, 1, 1990, 2_000, "b")),
                List.of(),
                List.of(new Fault("KILL", 0, 500, 500))),
            List.of(),
            0);

    assertThat(report.brokenDuplicates).hasSize(1);
  }

  /**
   * Seed 23 on the cluster: the owner was paused in its send, the takeover's send failed and
   * released the key, and the next claim was attempt 1 again.
   */
  @Test
  void aSecondFirstAttemptAfterAReleasedTakeoverIsAllowedWhenTheOwnerWasPaused() {
    DuplicateChecker.Report report =
        DuplicateChecker.check(
            history(
                List.of(
                    new Send("k", "pk", 1, 1, 80_085, 82_640, "paused-owner"),
                    new Send("k", "pk", 1, 3, 80_934, 80_939, "after-release")),
                List.of(new Call("k", "execute", 3, "SENT", "after-release", true, 80_941)),
                List.of(new Fault("PAUSE", 1, 80_083, 82_644))),
            List.of(),
            0);

    assertThat(report.ok()).isTrue();
    assertThat(report.allowedDuplicates).containsEntry("owner paused", 1);
  }

  @Test
  void aResultNoSendProducedAndAKeyStillHeldFail() {
    DuplicateChecker.Report report =
        DuplicateChecker.check(
            history(
                List.of(new Send("k", "pk", 1, 0, 90, 100, "a")),
                List.of(new Call("k", "execute", 1, "REPLAYED", "forged", true, 0)),
                List.of()),
            List.of("held"),
            0);

    assertThat(report.badResults).hasSize(1);
    assertThat(report.stuck).containsExactly("held");
    assertThat(report.ok()).isFalse();
  }

  @Test
  void theLongestQuietCountsFailedCallsAsQuietAndTheWindowsEdges() {
    FaultHistory history =
        history(
            List.of(),
            List.of(
                new Call("a", "execute", 0, "SENT", "r", true, 1_500),
                new Call("a", "execute", 1, "KeyStoreException", null, false, 3_000),
                new Call("a", "async", 2, "REPLAYED", "r", true, 6_500),
                new Call("a", "batch", 0, "REPLAYED", "r", true, 7_000),
                new Call("a", "execute", 0, "REPLAYED", "r", true, 30_000)),
            List.of());
    history.activeFromMillis = 1_000;
    history.activeUntilMillis = 9_000;

    // 1,500 to 6,500: the failed call in between does not count; the call after the window neither
    assertThat(DuplicateChecker.longestQuiet(history)).isEqualTo(5_000);

    history.activeUntilMillis = 20_000;
    assertThat(DuplicateChecker.check(history, List.of(), 0).longestQuietMillis)
        .as("a run that stalled after 7 s of 19")
        .isEqualTo(13_000);
  }

  @Test
  void withoutAWindowTheLongestQuietIsBetweenSuccessfulCalls() {
    FaultHistory history =
        history(
            List.of(),
            List.of(
                new Call("a", "execute", 0, "SENT", "r", true, 100),
                new Call("a", "execute", 0, "REPLAYED", "r", true, 2_100)),
            List.of());

    assertThat(DuplicateChecker.longestQuiet(history)).isEqualTo(2_000);
  }

  /**
   * A freeze between the guard's lease check and the provider call ends as the send begins: the
   * watcher may log its end a few milliseconds before the send's start, which still excuses it; a
   * stall that ended long before the send began does not (the guard's check came after it).
   */
  @Test
  void aStallThatEndedJustBeforeTheOwnersSendBeganExcusesTheTakeoverAndAnEarlierOneDoesNot() {
    List<Send> sends =
        List.of(
            new Send("k", "pk", 1, 6, 1_230, 1_240, "a"),
            new Send("k", "pk", 2, 7, 1_300, 1_310, "b"));
    List<Call> calls = List.of(new Call("k", "execute", 6, "SENT", "a", false, 1_250));

    DuplicateChecker.Report justBefore =
        DuplicateChecker.check(
            history(sends, calls, List.of(new Fault("STALL", 6, 900, 1_200))), List.of(), 0);
    DuplicateChecker.Report longBefore =
        DuplicateChecker.check(
            history(sends, calls, List.of(new Fault("STALL", 6, 500, 800))), List.of(), 0);

    assertThat(justBefore.allowedDuplicates).containsEntry("owner stalled", 1);
    assertThat(longBefore.brokenDuplicates).hasSize(1);
  }

  /** A process frozen by an overloaded host for a quarter lease or more is as good as paused. */
  @Test
  void aTakeoverAfterTheOwnerStalledIsAllowedAndWithoutTheStallItIsNot() {
    List<Send> sends =
        List.of(
            new Send("k", "pk", 1, 6, 100, 110, "a"), new Send("k", "pk", 2, 6, 1_300, 1_310, "b"));
    List<Call> calls = List.of(new Call("k", "batch", 6, "SENT", "a", false, 1_250));

    DuplicateChecker.Report stalled =
        DuplicateChecker.check(
            history(sends, calls, List.of(new Fault("STALL", 6, 200, 1_200))), List.of(), 0);
    DuplicateChecker.Report notStalled =
        DuplicateChecker.check(history(sends, calls, List.of()), List.of(), 0);

    assertThat(stalled.allowedDuplicates).containsEntry("owner stalled", 1);
    assertThat(notStalled.brokenDuplicates).hasSize(1);
  }

  /**
   * The CI run of 7b08ead on DynamoDB: one client sent a key as attempt 1, its lease ran out while
   * its renewal of that claim was still unanswered by the store (no fault of the nemesis, a loaded
   * host), another client took the key over after that (attempt 2, which sent nothing) and the
   * first client sent it again as attempt 3. Excused only by that claim's own renewal (or outcome
   * write) unanswered when its lease ran out, after its send began, with the takeover asked for
   * after that: not by a renewal answered in time, another claim's or process's slow call, a
   * takeover asked for while the lease still ran, or an outcome that was recorded.
   */
  @Test
  void aRenewalUnansweredWhenItsLeaseRanOutExcusesOnlyThatClaimsTakeover() {
    String key = "fault-key-189";
    String keyId = dev.idempotency.IdempotencyKey.digest(key);
    List<Send> sends =
        List.of(
            new Send(key, "pk", 1, 2, 1_000, 2_000, "r-2-1"),
            new Send(key, "pk", 3, 2, 2_600, 2_700, "r-2-2"));
    List<Call> calls =
        List.of(
            new Call(key, "execute", 2, "SENT", "r-2-1", false, 2_100),
            new Call(key, "execute", 2, "SENT", "r-2-2", true, 2_750));
    StoreCall takeover = new StoreCall("takeover", 0, keyId, 2, 2_000, 2_300, 2_800, false);
    StoreCall unanswered = new StoreCall("extend", 2, keyId, 1, 1_200, 2_500, 1_900, false);

    assertThat(checked(sends, calls, unanswered, takeover).allowedDuplicates)
        .containsEntry("owner's store answered after its lease", 1);
    assertThat(
            checked(
                    sends,
                    calls,
                    new StoreCall("complete", 2, keyId, 1, 1_950, 2_300, 1_990, true),
                    takeover)
                .allowedDuplicates)
        .as("the outcome write, failed after the lease ran out")
        .containsEntry("owner's store answered after its lease", 1);

    assertThat(checked(sends, calls, unanswered).brokenDuplicates)
        .as("no takeover logged")
        .hasSize(1);
    assertThat(
            checked(
                    sends,
                    calls,
                    unanswered,
                    new StoreCall("takeover", 0, keyId, 2, 1_800, 2_300, 2_600, false))
                .brokenDuplicates)
        .as("a takeover asked for while the lease still ran")
        .hasSize(1);
    assertThat(
            checked(
                    sends,
                    calls,
                    unanswered,
                    new StoreCall("takeover", 0, keyId, 4, 2_000, 2_300, 2_800, false))
                .brokenDuplicates)
        .as("the takeover of another claim")
        .hasSize(1);
    assertThat(
            checked(
                    sends,
                    calls,
                    new StoreCall("extend", 2, keyId, 1, 1_200, 1_850, 1_900, false),
                    takeover)
                .brokenDuplicates)
        .as("a slow renewal answered before the lease ran out")
        .hasSize(1);
    assertThat(
            checked(
                    sends,
                    calls,
                    new StoreCall("extend", 2, keyId, 3, 1_200, 2_500, 1_900, false),
                    takeover)
                .brokenDuplicates)
        .as("another claim's renewal")
        .hasSize(1);
    assertThat(
            checked(
                    sends,
                    calls,
                    new StoreCall("extend", 1, keyId, 1, 1_200, 2_500, 1_900, false),
                    takeover)
                .brokenDuplicates)
        .as("another process's renewal")
        .hasSize(1);
    assertThat(
            checked(
                    sends,
                    calls,
                    new StoreCall("extend", 2, keyId, 1, 500, 950, 900, false),
                    new StoreCall("takeover", 0, keyId, 2, 950, 990, 1_750, false))
                .brokenDuplicates)
        .as("a lease that ran out before the send began")
        .hasSize(1);
    assertThat(
            checked(
                    sends,
                    calls,
                    new StoreCall("claim", 2, keyId, 1, 1_200, 2_500, 1_900, false),
                    takeover)
                .brokenDuplicates)
        .as("a claim is no renewal of it")
        .hasSize(1);
    List<Call> recorded =
        List.of(
            new Call(key, "execute", 2, "SENT", "r-2-1", true, 2_100),
            new Call(key, "execute", 2, "SENT", "r-2-2", true, 2_750));
    assertThat(checked(sends, recorded, unanswered, takeover).brokenDuplicates)
        .as("an outcome the store recorded")
        .hasSize(1);
  }

  /**
   * A DynamoDB run (seed 17, 10 s, 22:15 UTC on 6 December 2026) that the checker before this cause
   * failed as the CI run of 7b08ead failed, its lines for the key: client 0, 0.4 s after its start
   * and before the nemesis began, sent {@code fault-key-192} (a 2-second send); its first renewal
   * of the claim took 1,809 ms, and its lease ran out 389 ms into it; client 1 asked to take the
   * key over 493 ms after that and sent it as attempt 2; client 0's outcome was refused. No fault
   * of the nemesis before it (client 0's clock stepped ahead meanwhile, which never excuses an
   * owner taken over).
   */
  @Test
  void theDynamoDbRunOfSeed17WhoseRenewalDynaliteAnsweredAfterTheLeaseIsExcused() {
    String key = "fault-key-192";
    String keyId = dev.idempotency.IdempotencyKey.digest(key);
    FaultHistory history =
        history(
            List.of(
                new Send(key, "pk", 1, 0, 1796595398365L, 1796595400399L, "r-0-9"),
                new Send(key, "pk", 2, 1, 1796595401186L, 1796595401190L, "r-1-2")),
            List.of(
                new Call(key, "execute", 0, "SENT", "r-0-9", false, 1796595401222L),
                new Call(key, "execute", 1, "SENT", "r-1-2", true, 1796595401587L)),
            List.of(new Fault("CLOCK_AHEAD", 0, 1796595399087L, 1796595400577L)));
    history.storeCalls.addAll(
        List.of(
            new StoreCall(
                "claim", 0, keyId, 1, 1796595398037L, 1796595398365L, 1796595398837L, false),
            // granted (the complete line's lease end is its start plus the lease), its answer 1 s
            // after the lease it renewed ran out: as the new log writes it
            new StoreCall(
                "extend",
                0,
                keyId,
                1,
                1796595398448L,
                1796595400257L,
                1796595398837L,
                false,
                true,
                1796595399248L),
            new StoreCall(
                "complete", 0, keyId, 1, 1796595400422L, 1796595401221L, 1796595399248L, false),
            new StoreCall(
                "takeover",
                1,
                keyId,
                2,
                1796595399330L,
                1796595400750L,
                1796595400130L,
                false,
                true,
                1796595400130L)));

    DuplicateChecker.Report report = DuplicateChecker.check(history, List.of(), 0);

    assertThat(report.brokenDuplicates).isEmpty();
    assertThat(report.allowedDuplicates)
        .containsExactly(java.util.Map.entry("owner's store answered after its lease", 1));
    StoreCall answeredInTime =
        new StoreCall(
            "extend",
            0,
            keyId,
            1,
            1796595398448L,
            1796595399200L,
            1796595398837L,
            false,
            true,
            1796595399248L);
    history.storeCalls.set(1, answeredInTime);
    assertThat(DuplicateChecker.check(history, List.of(), 0).brokenDuplicates)
        .as("the same renewal granted and answered before the lease it renewed ran out")
        .hasSize(1);
    history.storeCalls.clear();
    assertThat(DuplicateChecker.check(history, List.of(), 0).brokenDuplicates)
        .as("without the clients' store calls, as the checker saw the CI run")
        .singleElement()
        .asString()
        .contains("fault-key-192: attempt 1 by process 0");
  }

  private static DuplicateChecker.Report checked(
      List<Send> sends, List<Call> calls, StoreCall... storeCalls) {
    return DuplicateChecker.check(history(sends, calls, List.of(), storeCalls), List.of(), 0);
  }

  @Test
  void aStoreCallLineReadsBack() {
    StoreCall call = new StoreCall("extend", 2, "a-b_c", 3, 10, 20, 15, true);

    assertThat(StoreCall.parse(call.line())).isEqualTo(call);
    assertThat(call.leaseRanOutUnanswered()).isTrue();
    assertThat(call.lostTheLease()).as("refused or failed: the lease stood as it was").isTrue();
    StoreCall renewed = new StoreCall("extend", 2, "a-b_c", 3, 10, 20, 15, false, true, 30);
    assertThat(StoreCall.parse(renewed.line())).isEqualTo(renewed);
    assertThat(renewed.leaseRanOutUnanswered()).isTrue();
    assertThat(renewed.lostTheLease()).as("granted: the renewed lease still ran").isFalse();
    assertThat(new StoreCall("extend", 2, "a", 3, 10, 20, 25, false).leaseRanOutUnanswered())
        .isFalse();
    assertThat(new StoreCall("extend", 2, "a", 3, 10, 20, 0, false).leaseRanOutUnanswered())
        .isFalse();
  }
}
