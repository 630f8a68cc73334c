package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.tck.ObservedKeyStore;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;
import org.assertj.core.api.ThrowableAssert.ThrowingCallable;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/** SPEC section 12: bad input gets a clear error before the store is touched; nothing is sent. */
class BadInputTest {

  static final Duration TTL = Duration.ofHours(24);

  final ObservedKeyStore store = new ObservedKeyStore(InMemoryKeyStore.builder().build());
  final IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
  final AtomicInteger sends = new AtomicInteger();
  final Sender<String> sender =
      ctx -> {
        sends.incrementAndGet();
        return "sent";
      };

  @AfterEach
  void nothingWasTouchedOrSent() {
    assertThat(store.calls()).as("store calls").isZero();
    assertThat(sends).as("sends").hasValue(0);
  }

  static Stream<Arguments> badKeys() {
    return Stream.of(
        Arguments.of("", "must not be blank"),
        Arguments.of("   ", "must not be blank"),
        Arguments.of("k".repeat(1025), "at most 1024 characters, was 1025"),
        Arguments.of("otp:user\n42", "control characters; found U+000A at index 8"),
        Arguments.of("otp\u0000", "control characters; found U+0000"),
        Arguments.of("otp\u007f", "control characters; found U+007F"),
        Arguments.of("otp\u0085", "control characters; found U+0085"),
        Arguments.of("a\uD800b", "unpaired surrogate at index 1"),
        Arguments.of("a\uDC00", "unpaired surrogate at index 1"));
  }

  @ParameterizedTest
  @MethodSource("badKeys")
  void badKeyIsRefusedWithAMessageNamingTheProblem(String key, String message) {
    assertThatThrownBy(() -> guard.execute(key, TTL, sender))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining(message);
  }

  @Test
  void nullKeyIsRefused() {
    assertThatThrownBy(() -> guard.execute(null, TTL, sender))
        .isInstanceOf(NullPointerException.class)
        .hasMessageContaining("key");
  }

  static Stream<Arguments> badTtls() {
    return Stream.of(
        Arguments.of(Duration.ZERO, "ttl must be positive"),
        Arguments.of(Duration.ofSeconds(-1), "ttl must be positive"),
        Arguments.of(Duration.ofNanos(500_000), "ttl must be at least 1 ms"),
        Arguments.of(Duration.ofDays(365).plusMillis(1), "ttl must be at most 365 days"),
        Arguments.of(Duration.ofSeconds(30), "lease (PT30S) must be shorter than ttl (PT30S)"),
        Arguments.of(Duration.ofSeconds(10), "must be shorter than ttl"));
  }

  @ParameterizedTest
  @MethodSource("badTtls")
  void badTtlIsRefused(Duration ttl, String message) {
    assertThatThrownBy(() -> guard.execute("otp:user_42", ttl, sender))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining(message);
  }

  static Stream<Arguments> nullArguments() {
    IdempotencyGuard guard =
        IdempotencyGuard.builder().store(InMemoryKeyStore.builder().build()).build();
    Sender<String> sender = ctx -> "x";
    IdempotencyRequest request = IdempotencyRequest.of("k", TTL);
    return Stream.of(
        Arguments.of((ThrowingCallable) () -> guard.execute("k", null, sender), "ttl"),
        Arguments.of((ThrowingCallable) () -> guard.execute("k", TTL, null), "sender"),
        Arguments.of(
            (ThrowingCallable) () -> guard.execute("k", TTL, (ResultCodec<String>) null, sender),
            "codec"),
        Arguments.of(
            (ThrowingCallable) () -> guard.executeForOutcome(null, ResultCodec.string(), sender),
            "request"),
        Arguments.of((ThrowingCallable) () -> request.withFingerprint(null), "fingerprint"));
  }

  @ParameterizedTest
  @MethodSource("nullArguments")
  void nullArgumentIsANullPointerExceptionNamingIt(ThrowingCallable call, String name) {
    assertThatThrownBy(call).isInstanceOf(NullPointerException.class).hasMessageContaining(name);
  }

  @Test
  void keyOfExactlyTheMaximumLengthIsAccepted() {
    assertThat(IdempotencyKey.requireValid("k".repeat(1024))).hasSize(1024);
    assertThat(IdempotencyKey.requireValid("emoji \uD83D\uDCE9 ok")).isNotEmpty();
  }

  @Test
  void builderRefusesBadSettingsAtOnce() {
    assertThatThrownBy(() -> IdempotencyGuard.builder().build())
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("store is required");
    assertThatThrownBy(() -> IdempotencyGuard.builder().lease(Duration.ZERO))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("lease must be at least 1 ms");
    assertThatThrownBy(() -> IdempotencyGuard.builder().lease(Duration.ofNanos(999_999)))
        .as("a lease under 1 ms would become 0 ms in the stores: every repeat would take over")
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("lease must be at least 1 ms");
    assertThatThrownBy(() -> IdempotencyGuard.builder().leaseRenewalLimit(Duration.ZERO))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("leaseRenewalLimit");
    assertThatThrownBy(() -> IdempotencyGuard.builder().asyncExecutor(null))
        .isInstanceOf(NullPointerException.class)
        .hasMessageContaining("asyncExecutor");
    assertThatThrownBy(() -> IdempotencyGuard.builder().inFlightWait(Duration.ofMillis(-1)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("inFlightWait");
    assertThatThrownBy(() -> IdempotencyGuard.builder().completionAttempts(0))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("completionAttempts");
    assertThatThrownBy(() -> IdempotencyGuard.builder().store(null))
        .isInstanceOf(NullPointerException.class)
        .hasMessageContaining("store");
    assertThatThrownBy(() -> IdempotencyGuard.builder().clock(null))
        .isInstanceOf(NullPointerException.class)
        .hasMessageContaining("clock");
  }
}
