package dev.idempotency.examples;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.IdempotencyWindows;
import dev.idempotency.Outcome;
import dev.idempotency.ResultCodec;
import dev.idempotency.examples.providers.FakeSmsProvider;
import dev.idempotency.inmemory.InMemoryKeyStore;
import java.io.PrintStream;
import java.util.UUID;

/**
 * The OTP login walk-through: the auth service sends the same {@code POST /notify} twice because
 * the first response was lost. With a stable key the user gets one code; with a new random key per
 * retry (the common mistake) the user gets one code per attempt.
 *
 * <p>Run it with {@code mvn -q -pl examples -am compile exec:java}.
 */
public final class OtpWalkthrough {

  private final PrintStream out;

  /**
   * Creates the walk-through.
   *
   * @param out where to print the story
   */
  public OtpWalkthrough(PrintStream out) {
    this.out = out;
  }

  /**
   * Runs the walk-through on standard output.
   *
   * @param args ignored
   */
  public static void main(String[] args) {
    OtpWalkthrough walkthrough = new OtpWalkthrough(System.out);
    walkthrough.stableKey();
    walkthrough.newRandomKeyPerRetry();
  }

  /** The notify endpoint of the walk-through: one guard, one SMS provider. */
  static final class NotifyService {
    final FakeSmsProvider sms;
    final IdempotencyGuard guard =
        IdempotencyGuard.builder().store(InMemoryKeyStore.builder().build()).build();

    NotifyService(FakeSmsProvider sms) {
      this.sms = sms;
    }

    Outcome<String> notify(String key, String phone, String code) {
      return guard.executeForOutcome(
          IdempotencyRequest.of(key, IdempotencyWindows.TRANSACTIONAL),
          ResultCodec.string(),
          // The provider key travels with the send: the second layer, for the crash case.
          ctx -> sms.send(phone, "Your login code is " + code, ctx.providerKey()));
    }
  }

  /**
   * The seed's story with a stable key.
   *
   * @return the number of codes the user received
   */
  public int stableKey() {
    NotifyService service = new NotifyService(new FakeSmsProvider(801));
    String key = IdempotencyKey.of("otp", "user_42", "challenge_9f3a");
    out.println("== OTP login with a stable idempotency key ==");
    out.println();
    out.println("(Each POST /notify here is an in-process call of the notify service's handler;");
    out.println(" examples-spring-boot serves the same over HTTP.)");
    out.println();

    out.println("1st POST /notify  key=" + key);
    Outcome<String> first = service.notify(key, "+15550100042", "482913");
    describe(first);
    out.println("  (the response to the auth service is lost: it times out and retries)");
    out.println();

    out.println("2nd POST /notify  key=" + key + "   (retry after a timeout)");
    Outcome<String> second = service.notify(key, "+15550100042", "482913");
    describe(second);

    int codes = service.sms.accepted().size();
    out.println(
        "  " + (codes == 1 ? "no second SMS, the user receives one code" : codes + " codes sent!"));
    out.println();
    out.println("SMS provider accepted " + codes + " message(s):");
    for (FakeSmsProvider.Message message : service.sms.accepted()) {
      out.println(
          "  "
              + message.id()
              + " to "
              + message.recipient()
              + ", Idempotency-Key header "
              + message.idempotencyKey());
    }
    out.println("  (that header is ctx.providerKey(): a digest of the key, the same on every");
    out.println("   attempt, so the provider can drop a repeat after a crash too)");
    out.println();
    return codes;
  }

  /**
   * The seed's first common mistake: a new random key on every retry.
   *
   * @return the number of codes the user received
   */
  public int newRandomKeyPerRetry() {
    // the same provider's later messages: numbered on from n_901, so no id reads as a replay
    NotifyService service = new NotifyService(new FakeSmsProvider(901));
    out.println("== Common mistake: a new random key on every retry ==");
    out.println();
    String[] ordinals = {"1st", "2nd", "3rd"};
    for (String ordinal : ordinals) {
      String key = "otp:user_42:" + UUID.randomUUID();
      out.println(ordinal + " POST /notify  key=" + key);
      describe(service.notify(key, "+15550100042", "482913"));
    }
    int codes = service.sms.accepted().size();
    out.println();
    out.println(
        "SMS provider accepted "
            + codes
            + " messages: each retry looked new, so the user receives "
            + codes
            + " codes.");
    out.println("Fix: derive the key from stable business facts and reuse it on every retry.");
    return codes;
  }

  private void describe(Outcome<String> outcome) {
    if (outcome.replayed()) {
      out.println("  key seen     -> return the stored notification_id " + outcome.value());
    } else {
      out.println(
          "  key not seen -> store key -> enqueue SMS -> return notification_id "
              + outcome.value());
    }
  }
}
