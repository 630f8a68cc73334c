package dev.idempotency.examples;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class OtpWalkthroughTest {

  private final ByteArrayOutputStream buffer = new ByteArrayOutputStream();
  private final OtpWalkthrough walkthrough =
      new OtpWalkthrough(new PrintStream(buffer, true, StandardCharsets.UTF_8));

  private String printed() {
    return buffer.toString(StandardCharsets.UTF_8);
  }

  @Test
  void stableKeySendsOneCodeAndReplaysTheSameNotificationId() {
    int codes = walkthrough.stableKey();

    assertThat(codes).isEqualTo(1);
    assertThat(printed())
        .contains("1st POST /notify  key=otp:user_42:challenge_9f3a")
        .contains("key not seen -> store key -> enqueue SMS -> return notification_id n_801")
        .contains("key seen     -> return the stored notification_id n_801")
        .contains("no second SMS, the user receives one code");
  }

  @Test
  void randomKeyPerRetrySendsOneCodePerAttempt() {
    int codes = walkthrough.newRandomKeyPerRetry();

    assertThat(codes).isEqualTo(3);
    assertThat(printed()).contains("the user receives 3 codes").doesNotContain("key seen");
  }

  /**
   * The whole story, as main prints it: two sends never show one notification id (the second part
   * restarting at the first's id read as a replay), the in-process call is not passed off as HTTP,
   * and the provider key printed is explained.
   */
  @Test
  void theWholeStoryShowsEachSendWithItsOwnIdAndExplainsWhatItPrints() {
    walkthrough.stableKey();
    walkthrough.newRandomKeyPerRetry();

    java.util.List<String> sentIds = new java.util.ArrayList<>();
    java.util.regex.Matcher sent =
        java.util.regex.Pattern.compile("enqueue SMS -> return notification_id (n_\\d+)")
            .matcher(printed());
    while (sent.find()) {
      sentIds.add(sent.group(1));
    }
    assertThat(sentIds).hasSize(4).doesNotHaveDuplicates();
    assertThat(printed()).contains("in-process").contains("providerKey()");
  }
}
