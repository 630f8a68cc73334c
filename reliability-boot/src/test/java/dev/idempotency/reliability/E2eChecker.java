package dev.idempotency.reliability;

import dev.idempotency.reliability.FaultHistory.Call;
import dev.idempotency.reliability.FaultHistory.Send;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Checks both halves of the promise over an end-to-end run's history: no key sent twice without an
 * allowed cause ({@link DuplicateChecker}, the core run's rules and causes: an owner killed between
 * the provider's accept and the outcome write, a lease that lapsed while the store was cut off),
 * and nothing lost: every key a client asked for was answered 2xx in the end, every key answered
 * 2xx reached the provider at least once, and a replayed 2xx carries the body of a response the key
 * really got: of its first, where the key was sent once; where it was sent again (an allowed
 * duplicate: the outcome of the first was never recorded, so the repeat sent afresh), of one of its
 * fresh 2xx responses.
 */
final class E2eChecker {

  /** A 2xx a client got: replayed ({@code Idempotent-Replayed: true}) or fresh, and its body. */
  record Answer(boolean replayed, String body) {}

  /** What the checker found. */
  static final class Report {
    final DuplicateChecker.Report duplicates;
    int keys;
    int answered;
    long requests;
    long responses2xx;
    int published;
    int consumed;
    final Map<String, Integer> outcomes = new LinkedHashMap<>();
    final List<String> lost = new ArrayList<>();
    final List<String> changedBodies = new ArrayList<>();

    Report(DuplicateChecker.Report duplicates) {
      this.duplicates = duplicates;
    }

    boolean ok() {
      return duplicates.ok() && lost.isEmpty() && changedBodies.isEmpty();
    }

    @Override
    public String toString() {
      return "keys="
          + keys
          + " answered="
          + answered
          + " requests="
          + requests
          + " responses2xx="
          + responses2xx
          + " published="
          + published
          + " consumed="
          + consumed
          + " outcomes="
          + outcomes
          + " sends="
          + duplicates.sends
          + " faults="
          + duplicates.faults
          + " allowedDuplicates="
          + duplicates.allowedDuplicates
          + " brokenDuplicates="
          + duplicates.brokenDuplicates
          + " badResults="
          + duplicates.badResults
          + " lost="
          + lost
          + " changedBodies="
          + changedBodies;
    }
  }

  private static final Pattern ID = Pattern.compile("\"id\":\"([^\"]+)\"");

  private E2eChecker() {}

  /** The provider's message id in a response body, or the whole body if it names none. */
  static String id(String body) {
    Matcher matcher = ID.matcher(body);
    return matcher.find() ? matcher.group(1) : body;
  }

  /**
   * Checks a history whose calls are the clients' requests (outcome {@code SENT} or {@code
   * REPLAYED} for a 2xx, with the provider's message id as value; anything else for a request still
   * to be retried).
   *
   * @param answers every 2xx a client got, per key, in the order it got them
   * @param published the keys published to the listener's topic
   * @param consumed those the broker considers consumed (below the group's committed offset)
   */
  static Report check(
      FaultHistory history,
      Map<String, List<Answer>> answers,
      List<String> published,
      List<String> consumed) {
    Report report = new Report(DuplicateChecker.check(history, List.of(), 0));
    report.published = published.size();
    report.consumed = consumed.size();
    Set<String> keys = new LinkedHashSet<>();
    Set<String> answered = new LinkedHashSet<>();
    for (Call call : history.calls) {
      keys.add(call.key());
      report.requests++;
      report.outcomes.merge(call.outcome(), 1, Integer::sum);
      if (call.outcome().equals("SENT") || call.outcome().equals("REPLAYED")) {
        answered.add(call.key());
        report.responses2xx++;
      }
    }
    report.keys = keys.size();
    report.answered = answered.size();
    Map<String, Integer> sendsByKey = new HashMap<>();
    for (Send send : history.sends) {
      sendsByKey.merge(send.key(), 1, Integer::sum);
    }
    for (String key : keys) {
      if (!answered.contains(key)) {
        report.lost.add(key + ": never answered 2xx");
      } else if (!sendsByKey.containsKey(key)) {
        report.lost.add(key + ": answered 2xx, never reached the provider");
      }
    }
    Set<String> consumedKeys = new LinkedHashSet<>(consumed);
    for (String key : published) {
      if (!consumedKeys.contains(key)) {
        report.lost.add(key + ": published, not consumed when the run settled");
      } else if (!sendsByKey.containsKey(key)) {
        report.lost.add(key + ": consumed by the broker's account, never reached the provider");
      }
    }
    for (Map.Entry<String, List<Answer>> entry : answers.entrySet()) {
      String key = entry.getKey();
      int sends = sendsByKey.getOrDefault(key, 0);
      // the body each message id was first answered with; a key sent once has one id
      Map<String, String> firstById = new LinkedHashMap<>();
      for (Answer answer : entry.getValue()) {
        String id = id(answer.body());
        String first = firstById.putIfAbsent(sends <= 1 ? "" : id, answer.body());
        if (first != null && !first.equals(answer.body())) {
          report.changedBodies.add(
              key
                  + ": first 2xx "
                  + first
                  + ", then "
                  + (answer.replayed() ? "replayed " : "fresh ")
                  + answer.body()
                  + " (sent "
                  + sends
                  + " times)");
          break;
        }
      }
    }
    return report;
  }
}
