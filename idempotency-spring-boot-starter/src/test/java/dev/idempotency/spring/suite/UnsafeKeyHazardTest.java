package dev.idempotency.spring.suite;

import static dev.idempotency.spring.suite.Stack.PROVIDER;
import static dev.idempotency.spring.suite.Stack.STORE;
import static org.assertj.core.api.Assertions.assertThat;

import java.util.Collections;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * SPEC 16, a key that is not safe, on every entry point: one of 1,024 characters (allowed as a
 * plain key, too long once the entry point's name or scope is added), one of 2,000 characters, and
 * one holding a control character (a tab, the one an HTTP header can carry). Each is refused
 * clearly (400, naming the key), nothing is sent, the store is never asked.
 *
 * <p>On {@link HttpEntryPoint#MONO_METHOD} the refusal is the {@code Mono}'s error, so the
 * application's {@code onErrorResume} answers it ({@link MonoMethodUnsafeKeyTest}).
 */
class UnsafeKeyHazardTest extends HazardTest {

  static final List<String> UNSAFE_KEYS =
      List.of("k".repeat(1_024), "k".repeat(2_000), "otp:user\t42");

  @ParameterizedTest
  @MethodSource("dev.idempotency.spring.suite.HazardTest#entryPoints")
  void aKeyThatIsNotSafeIsRefusedClearlyWithoutAskingTheStore(EntryPoint entry) throws Exception {
    assertRefusedClearly(entry);
  }

  /**
   * On a listener, each unsafe key (in the message's Idempotency-Key header) makes a poison
   * message: dead-lettered once, acknowledged (no redelivery loop), nothing sent, the store never
   * asked.
   */
  @ParameterizedTest
  @MethodSource("listenerEntryPoints")
  void aKeyThatIsNotSafeMakesAPoisonMessageDeadLetteredOnceWithoutAskingTheStore(
      ListenerEntryPoint entry) throws Exception {
    ListenerApplication application = entry.shared();
    for (String key : UNSAFE_KEYS) {
      String payload = Waits.newKey(entry);
      String which = key.length() + " characters";
      int claimsBefore = STORE.claims.get();
      application.publish(key, payload);
      Waits.await(
          "the poison message dead-lettered", () -> application.deadLettered().contains(payload));
      application.awaitAcknowledged();
      assertThat(Collections.frequency(application.deadLettered(), payload))
          .as("dead-lettered once, " + which)
          .isEqualTo(1);
      assertThat(PROVIDER.sends(payload)).as(which).isZero();
      assertThat(PROVIDER.sends(key)).as(which).isZero();
      assertThat(STORE.claims.get()).as("the store never asked, " + which).isEqualTo(claimsBefore);
    }
  }

  /** Calls {@code entry} with each unsafe key and checks it was refused clearly, nothing sent. */
  static void assertRefusedClearly(EntryPoint entry) throws Exception {
    for (String key : UNSAFE_KEYS) {
      int claimsBefore = STORE.claims.get();
      Answer refused = entry.call(key);
      String which = key.length() + " characters: " + refused;
      assertThat(refused.status()).as(which).isEqualTo(400);
      assertThat(refused.body()).as(which).containsIgnoringCase("key");
      assertThat(PROVIDER.sends(key)).as(which).isZero();
      assertThat(STORE.claims.get()).as("the store never asked, " + which).isEqualTo(claimsBefore);
    }
  }
}
