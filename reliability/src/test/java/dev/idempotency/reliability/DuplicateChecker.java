package dev.idempotency.reliability;

import dev.idempotency.IdempotencyKey;
import dev.idempotency.reliability.FaultHistory.Call;
import dev.idempotency.reliability.FaultHistory.Fault;
import dev.idempotency.reliability.FaultHistory.Send;
import dev.idempotency.reliability.FaultHistory.StoreCall;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * Reads a fault run's whole history afterwards and checks the promise per key: at most one send,
 * except duplicates that each have an allowed cause; every value a call returned was produced by a
 * send of that key; nothing left in progress once the run settled.
 *
 * <p>The sends of a key are ordered by the time each sender started (the provider may log a slow
 * first send after a quicker takeover). A send is an allowed duplicate only if it is the send of
 * the takeover that the loss of the key by the owner before it led to: that owner is the one of the
 * send just before it (on a short-window key, the one before any that returned before it began),
 * with the same provider key, whose outcome was not recorded before it began, and which
 *
 * <ul>
 *   <li>was killed ({@code SIGKILL}) after its send began and before the other send ended: "owner
 *       killed";
 *   <li>was paused ({@code SIGSTOP}) at some time in that span, or in the {@link
 *       #PAUSE_SLACK_MILLIS} before its send began, so its lease ran out: "owner paused"; or did
 *       not run for a quarter lease or more in that span, or in the {@link #STALL_SLACK_MILLIS}
 *       before its send began (an overloaded host froze every thread of it, lease keeper included,
 *       which it logs itself as {@code STALL}): "owner stalled". The same when the paused or
 *       stalled owner is the one that sends later, whatever the other's outcome: frozen between its
 *       claim and its send while the other took the key over (and perhaps completed it), it sends
 *       as it wakes; its send then began within that slack of the freeze's logged end, and its own
 *       outcome, fenced by the owner token the takeover replaced, was not recorded. A process
 *       frozen once that sends long after it woke is no stale owner; or
 *   <li>was cut off from the store (a partition, a store restart or a slow network overlapped the
 *       span) and returned the send to its caller as not recorded: its lease ran out while it could
 *       not renew it, and its outcome, fenced by the owner token, was refused: "owner cut off from
 *       the store". An outcome not recorded without such a fault is no excuse: a live owner that
 *       can reach the store keeps its lease. A cut (partition or store restart) at least a lease
 *       long that overlapped the span excuses it without that evidence: no renewal got through it,
 *       so the lease ran out whatever the owner did (an owner killed later, before its batch logged
 *       the outcome as not recorded, leaves none);
 *   <li>returned the send as not recorded, its client logged a renewal or outcome write of that
 *       claim that did not keep its lease (refused or failed, or a renewal granted only after the
 *       lease it renewed, counted from its start, ran out) and was still unanswered when that lease
 *       ran out, after the send began, and a client logged the takeover of that claim asked for
 *       after that and before the other send began, the other send being of that takeover's attempt
 *       or a later one ({@link StoreCallLog}): "owner's store answered after its lease", a cut with
 *       no fault of the nemesis to show for it (a store, or a client's threads, slower than the
 *       lease on a loaded host). A renewal answered in time, or granted and answered before the
 *       lease it renewed ran out, is no excuse.
 * </ul>
 *
 * An owner with no such cause held the key (alive, or its outcome recorded): a send after it is
 * broken, whatever happened to owners before it. A kill of the first owner excuses its taker's
 * send, not a send after the taker completed the key; nor does a lapse excuse the owner sending
 * again within its own claim.
 *
 * <p>Two more causes are no duplicates at all, but sends the promise allows:
 *
 * <ul>
 *   <li>"window ended": a key with a short window ({@link FaultRunChild#isShortWindow}) sent again
 *       after every earlier send of it had returned. (When the window began is not in the logs: a
 *       batch may claim a key seconds before it sends it.) A send that begins while an earlier one
 *       is still running is never excused this way: a live owner's record outlives the window.
 *   <li>"taker's clock ahead": on a client-time store, of the send and the one of the owner just
 *       before it (as above), the send that took the key (the higher attempt; of two first
 *       attempts, the later, or on a short-window key either, since a clock ahead sees the window
 *       over and claims afresh whenever its send then starts) came from a process whose clock had
 *       been moved ahead of the true time (a {@code CLOCK_AHEAD} fault of its process that began
 *       before that send, and ended at most {@link #CLOCK_AHEAD_SLACK_MILLIS} before it, for a
 *       batch that claims long before it sends), so it saw a live lease as expired: clock skew,
 *       which database or server time prevents. A later send that took the key took it from an
 *       owner whose outcome was not recorded before it began (a completed key is replayed, whatever
 *       the clock; a short-window key aside); an earlier send that took it leaves only the owner it
 *       took the key from to send late, its fenced outcome not recorded, within {@link
 *       FaultRunChild#maxClockAheadMillis} of the taker's send, and not with a claim the clients'
 *       store log shows asked for only after the takeover. The same when such a process took the
 *       key and its send failed: its release let a third claim the key afresh while the owner it
 *       took the key from still sent, two first attempts (the fresh claim's send began after the
 *       failed send was logged; the owner taken over had its outcome refused, or not logged if its
 *       send began before the failure was, and began its send at most {@link
 *       FaultRunChild#maxClockAheadMillis} after the failure). An owner whose own clock ran ahead
 *       and was taken over is never excused: stepping its clock must not stop it renewing.
 * </ul>
 *
 * These are the cases the SPEC allows (a send whose outcome was never recorded, taken over once the
 * lease expired), and the provider key is what lets the provider absorb them. Anything else, a
 * second send while the first owner was alive and could reach the store, is a broken promise.
 */
final class DuplicateChecker {

  /** How long after its clock came back a process's takeover may still be excused by it. */
  static final long CLOCK_AHEAD_SLACK_MILLIS = 30_000;

  /**
   * How long before its send began a kill may be logged and still be the owner's: the nemesis logs
   * a kill just before it signals, and a thread of the process may start a send (and the provider
   * log it) in the milliseconds before the signal lands. Far shorter than a new client takes to
   * start, so a replacement's sends are never excused by its predecessor's kill.
   */
  static final long KILL_SLACK_MILLIS = 200;

  /**
   * How long before the owner's send began a stall of its process may have ended and still be the
   * owner's: the guard checks the lease just before it calls the sender, so a freeze between that
   * check and the provider call ends as the send begins, and the stall watcher (waking every 20 ms)
   * may log its end a few milliseconds before the provider logs the send's start.
   */
  static final long STALL_SLACK_MILLIS = 50;

  /**
   * How far a paused owner's send may begin from the pause's logged end and still be the pause's:
   * the nemesis logs the end once its {@code SIGCONT} has returned, and the process, woken by it,
   * may start the send it was frozen before a few milliseconds either side of that line (13 ms
   * after it in a long run). A send that begins later than this after the pause was checked by the
   * guard after the process woke, so the pause is not what let it through.
   */
  static final long PAUSE_SLACK_MILLIS = 50;

  /** What the checker found. */
  static final class Report {
    long calls;
    long sends;
    long replays;
    long firstSends;
    long keysSent;
    final Map<String, Integer> faults = new TreeMap<>();
    final Map<String, Integer> allowedDuplicates = new TreeMap<>();
    final List<String> brokenDuplicates = new ArrayList<>();
    final List<String> badResults = new ArrayList<>();
    final List<String> stuck = new ArrayList<>();
    int abandoned;

    /** Joined runs only ({@link OutboxChecker}): enqueues rolled back because a kill ended them. */
    long killedInFlight;

    /**
     * The longest time while the nemesis ran in which no call succeeded (sent or replayed), in ms:
     * a store restart or a cut shows here for its length; a harness that stalled shows as most of
     * the run.
     */
    long longestQuietMillis;

    boolean ok() {
      return brokenDuplicates.isEmpty() && badResults.isEmpty() && stuck.isEmpty();
    }

    int allowed() {
      return allowedDuplicates.values().stream().mapToInt(Integer::intValue).sum();
    }

    /** One row of the table a run prints. */
    String row(String store) {
      return String.format(
          "| %s | %,d | %,d | %,d | %.1f | %,d | %s | %s | %d | %s |",
          store,
          calls,
          sends,
          replays,
          longestQuietMillis / 1000.0,
          faults.values().stream().mapToInt(Integer::intValue).sum(),
          faults,
          allowed() == 0 ? "0" : allowed() + " " + allowedDuplicates,
          brokenDuplicates.size(),
          ok() ? "pass" : "FAIL");
    }

    static String header() {
      return "| store | calls | sends | replays | longest quiet (s) | faults | by type"
          + " | duplicates allowed (cause) | not allowed | checker |"
          + "\n|---|---|---|---|---|---|---|---|---|---|";
    }

    @Override
    public String toString() {
      return "calls="
          + calls
          + " sends="
          + sends
          + " replays="
          + replays
          + " longestQuietMillis="
          + longestQuietMillis
          + " faults="
          + faults
          + " allowedDuplicates="
          + allowedDuplicates
          + " brokenDuplicates="
          + brokenDuplicates
          + " badResults="
          + badResults
          + " stuck="
          + stuck
          + " abandoned="
          + abandoned
          + (killedInFlight > 0 ? " killedInFlight=" + killedInFlight : "");
    }
  }

  private DuplicateChecker() {}

  /**
   * The longest gap between successful calls while the nemesis ran, counting its start and end as
   * edges; without a window (an older run), between the first and last successful call.
   */
  static long longestQuiet(FaultHistory history) {
    boolean windowed = history.activeUntilMillis > 0;
    long[] times =
        history.calls.stream()
            .filter(c -> c.outcome().equals("SENT") || c.outcome().equals("REPLAYED"))
            .mapToLong(Call::millis)
            .filter(
                t -> !windowed || (t >= history.activeFromMillis && t <= history.activeUntilMillis))
            .sorted()
            .toArray();
    if (times.length == 0) {
      return windowed ? history.activeUntilMillis - history.activeFromMillis : 0;
    }
    long longest = windowed ? times[0] - history.activeFromMillis : 0;
    for (int i = 1; i < times.length; i++) {
      longest = Math.max(longest, times[i] - times[i - 1]);
    }
    return windowed
        ? Math.max(longest, history.activeUntilMillis - times[times.length - 1])
        : longest;
  }

  /**
   * Checks a history.
   *
   * @param stuck keys still in progress with a live lease after the run settled
   * @param abandoned keys left in progress by a dead owner, lease expired (taken over on next use)
   */
  static Report check(FaultHistory history, List<String> stuck, int abandoned) {
    Report report = new Report();
    report.calls = history.calls.size();
    report.sends = history.sends.size();
    report.longestQuietMillis = longestQuiet(history);
    report.stuck.addAll(stuck);
    report.abandoned = abandoned;
    for (Fault fault : history.faults) {
      report.faults.merge(fault.type(), 1, Integer::sum);
    }
    Map<String, List<Send>> sendsByKey = new HashMap<>();
    for (Send send : history.sends) {
      sendsByKey.computeIfAbsent(send.key(), k -> new ArrayList<>()).add(send);
    }
    Set<String> notRecorded = new HashSet<>();
    Map<String, Long> recordedAt = new HashMap<>();
    Map<String, List<Call>> failedSends = new HashMap<>();
    for (Call call : history.calls) {
      if (call.outcome().equals("SEND_FAILED")) {
        failedSends.computeIfAbsent(call.key(), k -> new ArrayList<>()).add(call);
      }
    }
    for (Call call : history.calls) {
      if (call.outcome().equals("REPLAYED")) {
        report.replays++;
      } else if (call.outcome().equals("SENT")) {
        report.firstSends++;
        String send = call.key() + "|" + call.process() + "|" + call.value();
        if (!call.recorded()) {
          notRecorded.add(send);
        } else {
          recordedAt.merge(send, call.millis(), Math::min);
        }
      }
    }
    report.keysSent = sendsByKey.size();
    for (Map.Entry<String, List<Send>> entry : sendsByKey.entrySet()) {
      List<Send> sends = entry.getValue();
      // not by attempt: a takeover whose send fails releases the key, and the next claim is attempt
      // 1
      sends.sort(Comparator.comparingLong(Send::startMillis));
      for (int i = 1; i < sends.size(); i++) {
        Send later = sends.get(i);
        String cause = windowEnded(sends.subList(0, i), later) ? "window ended" : null;
        if (cause == null) {
          cause = ownerLost(sends, i, history, notRecorded, recordedAt);
        }
        if (cause == null
            && aheadOwnerBetween(
                failedSends.getOrDefault(entry.getKey(), List.of()),
                sends.get(i - 1),
                later,
                history.faults,
                notRecorded,
                recordedAt,
                history.leaseMillis)) {
          cause = "taker's clock ahead";
        }

        if (cause != null) {
          report.allowedDuplicates.merge(cause, 1, Integer::sum);
        } else {
          report.brokenDuplicates.add(
              entry.getKey() + ": " + describe(sends.subList(0, i + 1)) + " (no allowed cause)");
        }
      }
    }
    for (Call call : history.calls) {
      if (call.value() == null
          || !(call.outcome().equals("SENT") || call.outcome().equals("REPLAYED"))) {
        continue;
      }
      List<Send> sends = sendsByKey.getOrDefault(call.key(), List.of());
      boolean produced = sends.stream().anyMatch(send -> send.result().equals(call.value()));
      if (!produced) {
        report.badResults.add(
            call.key()
                + ": "
                + call.outcome()
                + " "
                + call.value()
                + " by process "
                + call.process()
                + ", which no send of the key produced");
      } else if (call.outcome().equals("REPLAYED")
          && sends.size() == 1
          && !sends.get(0).result().equals(call.value())) {
        report.badResults.add(call.key() + ": replayed a result other than its one send's");
      }
    }
    return report;
  }

  /**
   * Why the owner that held the key before {@code sends[i]} lost it, so that that send is the
   * takeover the loss led to, or null. The owner is the one of the send just before it (by start);
   * on a short-window key, a send that returned before it began is passed over for the one before
   * it (its window may have ended, so it held nothing), but no other: an owner whose send has no
   * cause held the key alive (its lease kept, or its outcome recorded), and an earlier owner's loss
   * led to no takeover after it. So a kill, pause, cut or late store answer excuses the takeover's
   * send, never a later send of a key the taker held or completed.
   */
  private static String ownerLost(
      List<Send> sends,
      int i,
      FaultHistory history,
      Set<String> notRecorded,
      Map<String, Long> recordedAt) {
    Send later = sends.get(i);
    for (int j = i - 1; j >= 0; j--) {
      Send earlier = sends.get(j);
      String cause =
          cause(earlier, later, history.faults, notRecorded, recordedAt, history.leaseMillis);
      if (cause == null && leaseRanOutUnanswered(earlier, later, history, notRecorded)) {
        cause = "owner's store answered after its lease";
      }
      if (cause == null) {
        cause = takerClockAhead(earlier, later, history, recordedAt);
      }
      if (cause != null) {
        return cause;
      }
      boolean windowOver =
          FaultRunChild.isShortWindow(later.key()) && earlier.millis() < later.startMillis();
      if (!windowOver) {
        return null;
      }
    }
    return null;
  }

  /**
   * "taker's clock ahead": the send that took the key ({@code earlier} or {@code later}) came from
   * a process whose clock had been moved ahead, or null. {@code earlier} is the owner just before
   * {@code later} ({@link #ownerLost}), never an older one: a takeover by a clock ahead excuses the
   * two sends of that takeover, not a send after the taker held or completed the key.
   *
   * <ul>
   *   <li>When {@code later} took the key, {@code earlier}'s outcome was not recorded before {@code
   *       later} began: a completed key is replayed, not taken over, whatever the clock (on a
   *       short-window key a clock ahead may see the window over, so there it may be).
   *   <li>When {@code earlier} took the key, {@code later} is the owner it took the key from,
   *       sending late: its outcome, fenced by the owner token the takeover replaced, was not
   *       recorded, and its send began within {@link FaultRunChild#maxClockAheadMillis} of the
   *       taker's (the owner's lease, as its own clock, never behind, counted it, ended no later
   *       than the taker's clock ahead saw it end, and the takeover came before the taker's send);
   *       and the clients' store log does not show its claim asked for only after the takeover
   *       ({@link #claimedAfterTakeover}).
   * </ul>
   */
  private static String takerClockAhead(
      Send earlier, Send later, FaultHistory history, Map<String, Long> recordedAt) {
    if (!earlier.providerKey().equals(later.providerKey())) {
      return null;
    }
    long leaseMillis = history.leaseMillis;
    Long earlierRecorded = recordedAt.get(sendId(earlier));
    boolean laterMayHaveTaken =
        FaultRunChild.isShortWindow(later.key())
            || earlierRecorded == null
            || earlierRecorded >= later.startMillis();
    boolean earlierMayHaveTaken =
        !recordedAt.containsKey(sendId(later))
            && later.startMillis()
                <= earlier.startMillis() + FaultRunChild.maxClockAheadMillis(leaseMillis)
            && !claimedAfterTakeover(history, earlier, later);
    // the send that took the key: the higher attempt; of two fresh claims the later one, or on a
    // short-window key either (a clock ahead sees the window over and claims afresh, whether its
    // send then starts before or after the owner's)
    List<Send> takers =
        earlier.attempt() != later.attempt()
            ? List.of(earlier.attempt() > later.attempt() ? earlier : later)
            : FaultRunChild.isShortWindow(later.key()) ? List.of(earlier, later) : List.of(later);
    for (Send taker : takers) {
      if (taker == later ? !laterMayHaveTaken : !earlierMayHaveTaken) {
        continue;
      }
      if (clockAhead(taker.process(), taker.startMillis(), history.faults)) {
        return "taker's clock ahead";
      }
    }
    return null;
  }

  /**
   * Whether the clients' store log shows {@code owner}'s claim (its process, key and attempt,
   * granted) asked for only after {@code taker}'s takeover was answered (its takeover line's end,
   * or without that line the taker's send's start, which came after it): then the owner's claim is
   * not the one that takeover took, and the owner is no stale owner of it. Claims are logged only
   * when they took a quarter lease or more ({@link StoreCallLog}), so a missing line says nothing,
   * and a claim of that attempt logged before the takeover too leaves the owner the benefit of the
   * doubt.
   */
  private static boolean claimedAfterTakeover(FaultHistory history, Send taker, Send owner) {
    String keyId = IdempotencyKey.digest(owner.key());
    long takenBy = taker.startMillis();
    for (StoreCall call : history.storeCalls) {
      if (call.operation().equals("takeover")
          && call.process() == taker.process()
          && call.attempt() == taker.attempt()
          && call.keyId().equals(keyId)) {
        takenBy = Math.min(takenBy, call.untilMillis());
      }
    }
    boolean claimedAfter = false;
    for (StoreCall call : history.storeCalls) {
      if (call.operation().equals("claim")
          && call.granted()
          && call.process() == owner.process()
          && call.attempt() == owner.attempt()
          && call.keyId().equals(keyId)) {
        if (call.millis() <= takenBy) {
          return false;
        }
        claimedAfter = true;
      }
    }
    return claimedAfter;
  }

  /**
   * Whether {@code process}'s clock had been moved ahead at {@code millis}: a {@code CLOCK_AHEAD}
   * fault of it that began by then and ended at most {@link #CLOCK_AHEAD_SLACK_MILLIS} before.
   */
  private static boolean clockAhead(int process, long millis, List<Fault> faults) {
    for (Fault fault : faults) {
      if (fault.type().equals("CLOCK_AHEAD")
          && fault.process() == process
          && millis >= fault.millis()
          && millis <= fault.untilMillis() + CLOCK_AHEAD_SLACK_MILLIS) {
        return true;
      }
    }
    return false;
  }

  /**
   * Why {@code later} may repeat {@code earlier} because {@code earlier}'s owner lost the key
   * (killed, paused, stalled, cut off), or {@code later}'s own owner was paused or stalled between
   * its claim and its send, or null. An owner whose outcome was recorded before {@code later} began
   * lost nothing: the key was completed, and only a stale owner (claimed before it) sends after it.
   */
  private static String cause(
      Send earlier,
      Send later,
      List<Fault> faults,
      Set<String> notRecorded,
      Map<String, Long> recordedAt,
      long leaseMillis) {
    if (!earlier.providerKey().equals(later.providerKey())) {
      return null;
    }
    Long recorded =
        recordedAt.get(earlier.key() + "|" + earlier.process() + "|" + earlier.result());
    boolean completedBefore = recorded != null && recorded < later.startMillis();
    for (Fault fault : faults) {
      if (completedBefore || fault.process() != earlier.process()) {
        continue;
      }
      if (fault.type().equals("KILL")
          && fault.millis() >= earlier.startMillis() - KILL_SLACK_MILLIS
          && fault.millis() <= later.millis()) {
        return "owner killed";
      }
      if (fault.type().equals("PAUSE")
          && fault.millis() <= later.millis()
          && fault.untilMillis() >= earlier.startMillis() - PAUSE_SLACK_MILLIS) {
        return "owner paused";
      }
      if (fault.type().equals("STALL")
          && fault.millis() <= later.millis()
          && fault.untilMillis() >= earlier.startMillis() - STALL_SLACK_MILLIS) {
        return "owner stalled";
      }
    }
    for (Fault fault : faults) {
      // the other way round: the later send is the stale owner's, paused between its claim and its
      // send while the other took the key over, and sending as it woke (the guard checked its lease
      // before the pause, and a freeze between that check and the provider call ends as the send
      // begins); its outcome, fenced by the owner token the takeover replaced, was not recorded.
      // Not cut off by the earlier one's recorded outcome: the taker may well complete the key
      // while the stale owner sleeps
      boolean pause = fault.type().equals("PAUSE");
      long slack = pause ? PAUSE_SLACK_MILLIS : STALL_SLACK_MILLIS;
      if ((pause || fault.type().equals("STALL"))
          && fault.process() == later.process()
          && !recordedAt.containsKey(sendId(later))
          && fault.millis() <= later.startMillis()
          && later.startMillis() <= fault.untilMillis() + slack
          && fault.untilMillis() >= earlier.startMillis()) {
        return pause ? "owner paused" : "owner stalled";
      }
    }
    if (completedBefore) {
      return null;
    }
    for (Fault fault : faults) {
      // a cut at least a lease long lets no renewal through: the owner's lease ran out whatever it
      // did, so a takeover after it is the cut's, even when the owner was killed before it could
      // log the outcome as not recorded (a batch killed before its record() returned)
      boolean cut = fault.type().equals("PARTITION") || fault.type().equals("STORE_RESTART");
      if (cut
          && fault.untilMillis() - fault.millis() >= leaseMillis
          && fault.millis() <= later.startMillis()
          && fault.untilMillis() >= earlier.startMillis()) {
        return "owner cut off from the store";
      }
    }
    if (notRecorded.contains(earlier.key() + "|" + earlier.process() + "|" + earlier.result())) {
      for (Fault fault : faults) {
        boolean storeSide =
            fault.type().equals("PARTITION")
                || fault.type().equals("STORE_RESTART")
                || fault.type().equals("DELAY");
        if (storeSide
            && fault.millis() <= later.millis()
            && fault.untilMillis() >= earlier.startMillis()) {
          return "owner cut off from the store";
        }
      }
    }
    return null;
  }

  /**
   * Whether the earlier send's owner lost its claim to its own store's slowness: its outcome was
   * refused (not recorded), its client logged a renewal or outcome write of that very claim
   * (process, key and attempt) that did not keep its lease (refused or failed, or granted, with the
   * lease it renewed from its start) and was still unanswered when that lease ran out, after the
   * send began, and a client logged the takeover of that claim (the next attempt) asked for after
   * that lease ran out and before the later send began, the later send being of that takeover's
   * attempt or a later one, with the same provider key ({@link StoreCallLog}). The store (or the
   * way to it, or the client's threads) took longer than the lease to answer a live owner: what a
   * cut does, with no fault of the nemesis to show for it, and what {@code docs/guarantees.md}
   * names as the one way a live owner leaves its key as a crash would ("a store that stays away
   * until the lease ends"). A renewal that came back in time, another claim's slow call, or a
   * takeover asked for before the lease ran out (clock skew, or a broken store), is no excuse.
   */
  static boolean leaseRanOutUnanswered(
      Send earlier, Send later, FaultHistory history, Set<String> notRecorded) {
    if (!notRecorded.contains(earlier.key() + "|" + earlier.process() + "|" + earlier.result())
        || !earlier.providerKey().equals(later.providerKey())
        || later.attempt() <= earlier.attempt()) {
      return false;
    }
    String keyId = IdempotencyKey.digest(earlier.key());
    for (StoreCall call : history.storeCalls) {
      if (call.process() == earlier.process()
          && call.attempt() == earlier.attempt()
          && call.keyId().equals(keyId)
          && (call.operation().equals("extend") || call.operation().equals("complete"))
          && call.lostTheLease()
          && call.leaseAfterMillis() >= earlier.startMillis()
          && takenOverAfter(
              history, keyId, earlier.attempt() + 1, call.leaseAfterMillis(), later)) {
        return true;
      }
    }
    return false;
  }

  /**
   * Whether a client logged the takeover of the key to {@code attempt}, asked for no earlier than
   * {@code leaseEnd} (the lease it took had run out by then on the true clock, as its owner asked
   * for it) and before the later send began.
   */
  private static boolean takenOverAfter(
      FaultHistory history, String keyId, int attempt, long leaseEnd, Send later) {
    for (StoreCall call : history.storeCalls) {
      if (call.operation().equals("takeover")
          && call.keyId().equals(keyId)
          && call.attempt() == attempt
          && call.millis() >= leaseEnd
          && call.millis() <= later.startMillis()) {
        return true;
      }
    }
    return false;
  }

  /**
   * Whether a process whose clock was ahead held the key between the two sends and sent nothing
   * (its send failed, so it released the key): it took the claim of one of them (the owner taken
   * over) from a live lease, clock skew, and its release let the other claim the key afresh, so
   * both sent as the same attempt. The fresh claim came after the release, so its send began after
   * the failed send was logged. It may be the first to send: a batch claims its keys first and
   * sends them one by one, so the owner taken over may send after the taker has taken and released
   * the key (seed 17 on PostgreSQL with client time). The owner taken over
   *
   * <ul>
   *   <li>had its outcome, fenced by the owner token the takeover replaced, refused: a completed
   *       key is replayed, never taken by a clock ahead, so an owner whose outcome was recorded was
   *       not taken over. Its call line may be missing (a process killed before it logged) only
   *       when its send began before the failed send was logged; and
   *   <li>began its send at most {@link FaultRunChild#maxClockAheadMillis} after the failed send
   *       was logged: its guard sends on a live lease only, and that lease ended no later than the
   *       taker's clock ahead saw it end, at most that long after the takeover.
   * </ul>
   *
   * A release with both outcomes recorded, or whose would-be owner sent long after it, took no
   * claim of either.
   */
  private static boolean aheadOwnerBetween(
      List<Call> failedSends,
      Send earlier,
      Send later,
      List<Fault> faults,
      Set<String> notRecorded,
      Map<String, Long> recordedAt,
      long leaseMillis) {
    for (Call failed : failedSends) {
      if (!clockAhead(failed.process(), failed.millis(), faults)) {
        continue;
      }
      boolean earlierTaken =
          failed.millis() <= later.startMillis()
              && takenByTheRelease(failed, earlier, notRecorded, recordedAt, leaseMillis);
      boolean laterTaken =
          failed.millis() <= earlier.startMillis()
              && takenByTheRelease(failed, later, notRecorded, recordedAt, leaseMillis);
      if (earlierTaken || laterTaken) {
        return true;
      }
    }
    return false;
  }

  /**
   * Whether {@code owner} may be the owner taken over by the clock-ahead process whose send failed
   * ({@code failed}) and that released the key ({@link #aheadOwnerBetween}).
   */
  private static boolean takenByTheRelease(
      Call failed,
      Send owner,
      Set<String> notRecorded,
      Map<String, Long> recordedAt,
      long leaseMillis) {
    boolean refused = notRecorded.contains(sendId(owner));
    boolean unlogged =
        !refused
            && !recordedAt.containsKey(sendId(owner))
            && owner.startMillis() <= failed.millis();
    return (refused || unlogged)
        && owner.startMillis() <= failed.millis() + FaultRunChild.maxClockAheadMillis(leaseMillis);
  }

  /** How a send's call line is looked up: key, process and result. */
  private static String sendId(Send send) {
    return send.key() + "|" + send.process() + "|" + send.result();
  }

  /** Whether {@code later} is a short-window key's send after every earlier one returned. */
  private static boolean windowEnded(List<Send> earlier, Send later) {
    return FaultRunChild.isShortWindow(later.key())
        && earlier.stream().allMatch(send -> send.millis() < later.startMillis());
  }

  private static String describe(List<Send> sends) {
    StringBuilder out = new StringBuilder();
    for (Send send : sends) {
      out.append(out.length() == 0 ? "" : ", ")
          .append("attempt ")
          .append(send.attempt())
          .append(" by process ")
          .append(send.process())
          .append(" at ")
          .append(send.millis());
    }
    return out.toString();
  }
}
