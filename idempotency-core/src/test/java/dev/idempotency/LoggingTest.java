package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.tck.MutableClock;
import dev.idempotency.tck.ObservedKeyStore;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import org.junit.jupiter.api.Test;

/**
 * SPEC section 11: logs at INFO and above never print raw keys or results. slf4j-simple (the test
 * binding) writes INFO and above to standard error, which this test captures while it drives every
 * path that logs a warning.
 */
class LoggingTest {

  static final String KEY = "otp:+15551234567:challenge_secret";
  static final String RESULT = "result-secret-n_801";

  @Test
  void warningsNameKeysOnlyByDigestAndNeverPrintResults() {
    PrintStream original = System.err;
    ByteArrayOutputStream captured = new ByteArrayOutputStream();
    System.setErr(new PrintStream(captured, true, StandardCharsets.UTF_8));
    try {
      driveEveryWarningPath();
    } finally {
      System.setErr(original);
    }
    String log = captured.toString(StandardCharsets.UTF_8);

    assertThat(log).contains("WARN").contains(IdempotencyKey.digest(KEY));
    assertThat(log).doesNotContain("+15551234567").doesNotContain("secret");
  }

  private static void driveEveryWarningPath() {
    MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
    ObservedKeyStore store = new ObservedKeyStore(InMemoryKeyStore.builder().build());
    IdempotencyGuard guard =
        IdempotencyGuard.builder().store(store).clock(clock).failOpen(true).build();
    Duration ttl = Duration.ofHours(1);

    store.failCompletes.set(100); // outcome not recorded
    guard.execute(KEY, ttl, ctx -> RESULT);
    clock.advance(Duration.ofMinutes(1)); // lease passed: takeover
    guard.execute(
        KEY,
        ttl,
        ctx -> {
          clock.advance(Duration.ofMinutes(1)); // lease overrun
          return RESULT;
        });
    store.failClaims.set(1); // fail-open send
    guard.execute(KEY, ttl, ctx -> RESULT);
    store.failCompletes.set(0);
    store.failReleases.set(1);
    clock.advance(Duration.ofHours(2));
    catchThrowable(
        () ->
            guard.execute(
                KEY,
                ttl,
                ctx -> {
                  throw new IllegalStateException("provider down");
                }));
    clock.advance(Duration.ofHours(2));
    guard.execute(
        KEY,
        ttl,
        ResultCodec.ofText(
            v -> {
              throw new IllegalStateException("x");
            },
            t -> t),
        ctx -> RESULT);
  }
}
