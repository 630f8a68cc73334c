package dev.idempotency.reliability;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.reliability.E2eChecker.Answer;
import dev.idempotency.reliability.FaultHistory.Call;
import dev.idempotency.reliability.FaultHistory.Fault;
import dev.idempotency.reliability.FaultHistory.Send;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The end-to-end checker's teeth: each half of the promise, broken in a history, fails it. */
class E2eCheckerTest {

  private static FaultHistory history(List<Send> sends, List<Call> calls, List<Fault> faults) {
    FaultHistory history = new FaultHistory();
    history.sends.addAll(sends);
    history.calls.addAll(calls);
    history.faults.addAll(faults);
    history.leaseMillis = 2_000;
    return history;
  }

  private static E2eChecker.Report check(FaultHistory history, Map<String, List<Answer>> answers) {
    return E2eChecker.check(history, answers, List.of(), List.of());
  }

  private static Call call(String key, String outcome, String value, long millis) {
    return new Call(key, "/send", 0, outcome, value, true, millis);
  }

  private static final String BODY_1 = "{\"id\":\"msg-1\"}";
  private static final String BODY_2 = "{\"id\":\"msg-2\"}";

  @Test
  void oneSendAnsweredAndReplayedPasses() {
    E2eChecker.Report report =
        check(
            history(
                List.of(new Send("k", "pk", 1, 1, 90, 100, "msg-1")),
                List.of(
                    call("k", "TIMEOUT", null, 50),
                    call("k", "SENT", "msg-1", 200),
                    call("k", "REPLAYED", "msg-1", 300)),
                List.of()),
            Map.of("k", List.of(new Answer(false, BODY_1), new Answer(true, BODY_1))));

    assertThat(report.ok()).as(report.toString()).isTrue();
    assertThat(report.keys).isEqualTo(1);
    assertThat(report.requests).isEqualTo(3);
  }

  /** The async timeout fix reverted: the key released while its send ran, the retry sends again. */
  @Test
  void aSecondSendWhileTheFirstOwnerLivedFails() {
    E2eChecker.Report report =
        check(
            history(
                List.of(
                    new Send("k", "pk", 1, 1, 90, 100, "msg-1"),
                    new Send("k", "pk", 1, 1, 1_000, 1_010, "msg-2")),
                List.of(call("k", "HTTP_503", null, 900), call("k", "SENT", "msg-2", 2_000)),
                List.of()),
            Map.of("k", List.of(new Answer(false, BODY_2))));

    assertThat(report.ok()).isFalse();
    assertThat(report.duplicates.brokenDuplicates).hasSize(1);
  }

  /** A SIGTERM is no excuse: close() must let the send record its outcome. */
  @Test
  void aSecondSendAfterAGracefulShutdownFails() {
    E2eChecker.Report report =
        check(
            history(
                List.of(
                    new Send("k", "pk", 1, 1, 90, 100, "msg-1"),
                    new Send("k", "pk", 2, 2, 5_000, 5_010, "msg-2")),
                List.of(
                    call("k", "CONNECTION_REFUSED", null, 900), call("k", "SENT", "msg-2", 6_000)),
                List.of(new Fault("SHUTDOWN", 1, 200, 1_500))),
            Map.of("k", List.of(new Answer(false, BODY_2))));

    assertThat(report.duplicates.brokenDuplicates).hasSize(1);
    assertThat(report.ok()).isFalse();
  }

  /**
   * A broker restart is no excuse either: the store stayed up, so a record redelivered after a
   * failed offset commit must be replayed, not sent again.
   */
  @Test
  void aSecondSendAcrossABrokerRestartFails() {
    E2eChecker.Report report =
        check(
            history(
                List.of(
                    new Send("k", "pk", 1, 1, 90, 100, "msg-1"),
                    new Send("k", "pk", 1, 1, 5_000, 5_010, "msg-2")),
                List.of(call("k", "SENT", "msg-2", 6_000)),
                List.of(new Fault("BROKER_RESTART", 0, 150, 4_000))),
            Map.of("k", List.of(new Answer(false, BODY_2))));

    assertThat(report.duplicates.brokenDuplicates).hasSize(1);
    assertThat(report.ok()).isFalse();
  }

  /** SIGKILL between the provider's accept and the outcome write: the allowed duplicate. */
  @Test
  void aSecondSendAfterTheOwnerWasKilledIsAllowed() {
    E2eChecker.Report report =
        check(
            history(
                List.of(
                    new Send("k", "pk", 1, 1, 90, 100, "msg-1"),
                    new Send("k", "pk", 2, 2, 5_000, 5_010, "msg-2")),
                List.of(
                    call("k", "CONNECTION_ERROR", null, 200), call("k", "SENT", "msg-2", 6_000)),
                List.of(new Fault("KILL", 1, 150, 150))),
            Map.of("k", List.of(new Answer(false, BODY_2))));

    assertThat(report.ok()).as(report.toString()).isTrue();
    assertThat(report.duplicates.allowedDuplicates).containsEntry("owner killed", 1);
  }

  @Test
  void aKeyNeverAnswered2xxIsLost() {
    E2eChecker.Report report =
        check(history(List.of(), List.of(call("k", "HTTP_503", null, 100)), List.of()), Map.of());

    assertThat(report.ok()).isFalse();
    assertThat(report.lost).containsExactly("k: never answered 2xx");
  }

  @Test
  void aKeyAnswered2xxThatNeverReachedTheProviderIsLost() {
    E2eChecker.Report report =
        check(
            history(List.of(), List.of(call("k", "SENT", "msg-1", 100)), List.of()),
            Map.of("k", List.of(new Answer(false, BODY_1))));

    assertThat(report.ok()).isFalse();
    assertThat(report.lost).containsExactly("k: answered 2xx, never reached the provider");
  }

  @Test
  void aReplayWithAnotherBodyThanTheFirstFails() {
    E2eChecker.Report report =
        check(
            history(
                List.of(new Send("k", "pk", 1, 1, 90, 100, "msg-1")),
                List.of(call("k", "SENT", "msg-1", 200), call("k", "REPLAYED", "msg-1", 300)),
                List.of()),
            Map.of(
                "k",
                List.of(
                    new Answer(false, BODY_1), new Answer(true, "{\"id\":\"msg-1\",\"x\":1}"))));

    assertThat(report.ok()).isFalse();
    assertThat(report.changedBodies).hasSize(1);
  }

  /**
   * Seed 7's key 41: answered during a store outage (outcome not recorded), sent again by the probe
   * at the end, whose fresh answer the client lost to the async timeout (409); its replay is the
   * second send's body.
   */
  @Test
  void aReplayOfASecondSendWhoseFreshAnswerTheClientNeverSawPasses() {
    E2eChecker.Report report =
        check(
            history(
                List.of(
                    new Send("k", "pk", 1, 1, 90, 100, "msg-1"),
                    new Send("k", "pk", 2, 1, 5_000, 5_010, "msg-2")),
                List.of(
                    call("k", "SENT", "msg-1", 200),
                    call("k", "HTTP_409", null, 5_800),
                    call("k", "REPLAYED", "msg-2", 6_000)),
                List.of(new Fault("STORE_RESTART", 0, 50, 3_000))),
            Map.of("k", List.of(new Answer(false, BODY_1), new Answer(true, BODY_2))));

    assertThat(report.ok()).as(report.toString()).isTrue();
  }

  @Test
  void aReplayOfASecondSendWithAnotherBodyThanItsFreshAnswerFails() {
    E2eChecker.Report report =
        check(
            history(
                List.of(
                    new Send("k", "pk", 1, 1, 90, 100, "msg-1"),
                    new Send("k", "pk", 2, 1, 5_000, 5_010, "msg-2")),
                List.of(
                    call("k", "SENT", "msg-1", 200),
                    call("k", "SENT", "msg-2", 5_800),
                    call("k", "REPLAYED", "msg-2", 6_000)),
                List.of(new Fault("STORE_RESTART", 0, 50, 3_000))),
            Map.of(
                "k",
                List.of(
                    new Answer(false, BODY_1),
                    new Answer(false, BODY_2),
                    new Answer(true, "{\"id\":\"msg-2\",\"to\":\"x\"}"))));

    assertThat(report.changedBodies).hasSize(1);
    assertThat(report.ok()).isFalse();
  }

  @Test
  void aMessageConsumedByTheBrokersAccountButNeverSentIsLost() {
    E2eChecker.Report report =
        E2eChecker.check(
            history(List.of(new Send("m1", "pk", 1, 1, 90, 100, "msg-1")), List.of(), List.of()),
            Map.of(),
            List.of("m1", "m2", "m3"),
            List.of("m1", "m2"));

    assertThat(report.ok()).isFalse();
    assertThat(report.lost)
        .containsExactly(
            "m2: consumed by the broker's account, never reached the provider",
            "m3: published, not consumed when the run settled");
  }

  /**
   * The outcome write failed during a store outage (the caller still got its 2xx), so the repeat
   * sent afresh: the later replays carry that second response's body.
   */
  @Test
  void aRepeatThatSentAfreshAfterAnUnrecordedOutcomeReplaysItsOwnBody() {
    E2eChecker.Report report =
        check(
            history(
                List.of(
                    new Send("k", "pk", 1, 1, 90, 100, "msg-1"),
                    new Send("k", "pk", 2, 1, 5_000, 5_010, "msg-2")),
                List.of(
                    call("k", "SENT", "msg-1", 200),
                    call("k", "SENT", "msg-2", 5_100),
                    call("k", "REPLAYED", "msg-2", 6_000)),
                List.of(new Fault("STORE_RESTART", 0, 50, 3_000))),
            Map.of(
                "k",
                List.of(
                    new Answer(false, BODY_1),
                    new Answer(false, BODY_2),
                    new Answer(true, BODY_2))));

    assertThat(report.ok()).as(report.toString()).isTrue();
    assertThat(report.duplicates.allowedDuplicates)
        .containsEntry("owner cut off from the store", 1);
  }
}
