package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import org.junit.jupiter.api.Test;

class IdempotencyKeyTest {

  @Test
  void joinsPartsWithColons() {
    assertThat(IdempotencyKey.of("otp", "user_42", "challenge_9f3a"))
        .isEqualTo("otp:user_42:challenge_9f3a");
  }

  @Test
  void escapesTheSeparatorSoDifferentTuplesNeverCollide() {
    assertThat(IdempotencyKey.of("a:b", "c")).isEqualTo("a\\:b:c");
    assertThat(IdempotencyKey.of("a", "b:c")).isEqualTo("a:b\\:c");
    assertThat(IdempotencyKey.of("a:b", "c")).isNotEqualTo(IdempotencyKey.of("a", "b:c"));
    assertThat(IdempotencyKey.of("a\\", "b")).isNotEqualTo(IdempotencyKey.of("a", "\\b"));
  }

  @Test
  void refusesNoPartsNullPartsAndInvalidResults() {
    assertThatThrownBy(IdempotencyKey::of)
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("parts must not be empty");
    assertThatThrownBy(() -> IdempotencyKey.of("a", null))
        .isInstanceOf(NullPointerException.class)
        .hasMessageContaining("null");
    assertThatThrownBy(() -> IdempotencyKey.of("a\tb"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("control");
  }

  /** Property: joining is injective, shown by decoding every key back into its exact parts. */
  @Property(tries = 2000)
  void everyTupleDecodesBackToItself(@ForAll("tuples") List<String> parts) {
    String key = IdempotencyKey.of(parts.toArray(String[]::new));

    assertThat(decode(key)).isEqualTo(parts);
  }

  @Property(tries = 2000)
  void differentTuplesGiveDifferentKeysAndDigests(
      @ForAll("tuples") List<String> first, @ForAll("tuples") List<String> second) {
    String a = IdempotencyKey.of(first.toArray(String[]::new));
    String b = IdempotencyKey.of(second.toArray(String[]::new));

    assertThat(a.equals(b)).isEqualTo(first.equals(second));
    assertThat(IdempotencyKey.digest(a).equals(IdempotencyKey.digest(b)))
        .isEqualTo(first.equals(second));
  }

  @Provide
  Arbitrary<List<String>> tuples() {
    Arbitrary<String> part = Arbitraries.strings().withChars(":\\ab").ofMinLength(0).ofMaxLength(6);
    return part.list()
        .ofMinSize(1)
        .ofMaxSize(5)
        .filter(parts -> !String.join(":", parts).isEmpty())
        .filter(parts -> !(parts.size() == 1 && parts.get(0).isBlank()));
  }

  private static List<String> decode(String key) {
    List<String> parts = new ArrayList<>();
    StringBuilder part = new StringBuilder();
    for (int i = 0; i < key.length(); i++) {
      char ch = key.charAt(i);
      if (ch == '\\') {
        part.append(key.charAt(++i));
      } else if (ch == ':') {
        parts.add(part.toString());
        part.setLength(0);
      } else {
        part.append(ch);
      }
    }
    parts.add(part.toString());
    return parts;
  }

  /** The rule as it was written before it became a loop: the oracle for the property below. */
  private static final java.util.regex.Pattern OPERATION_RULE =
      java.util.regex.Pattern.compile("[A-Za-z0-9_.\\-]{1,64}");

  @Property
  void anOperationNameIsOneTo64OfTheAllowedCharacters(@ForAll("operationCandidates") String name) {
    boolean expected = OPERATION_RULE.matcher(name).matches();
    assertThat(IdempotencyKey.isOperationName(name)).as("%s", name).isEqualTo(expected);
    assertThat(IdempotencyKey.operationOf(name + ":rest"))
        .isEqualTo(expected ? name : IdempotencyKey.DEFAULT_OPERATION);
  }

  @Provide
  Arbitrary<String> operationCandidates() {
    return Arbitraries.strings()
        .withChars("aZ09_.-:/ é\u00a0")
        .withCharRange('\u0020', '\u007e')
        .ofMinLength(0)
        .ofMaxLength(70)
        .filter(name -> !name.contains(":"));
  }

  @Test
  void theOperationIsTheNamespaceOnlyWhenItIsAName() {
    assertThat(IdempotencyKey.operationOf("otp:+4412345")).isEqualTo("otp");
    assertThat(IdempotencyKey.operationOf("order-shipped.v2:1")).isEqualTo("order-shipped.v2");
    assertThat(IdempotencyKey.operationOf("no-namespace")).isEqualTo("default");
    assertThat(IdempotencyKey.operationOf(":leading")).isEqualTo("default");
    assertThat(IdempotencyKey.operationOf("a b:c")).isEqualTo("default");
    assertThat(IdempotencyKey.operationOf("x".repeat(64) + ":1")).isEqualTo("x".repeat(64));
    assertThat(IdempotencyKey.operationOf("x".repeat(65) + ":1")).isEqualTo("default");
    assertThat(IdempotencyKey.isOperationName(null)).isFalse();
    assertThat(IdempotencyKey.isOperationName("")).isFalse();
  }

  @Test
  void providerKeyIsStableShortAndHeaderSafe() {
    String providerKey = IdempotencyKey.providerKey("otp:user_42:challenge_9f3a");

    assertThat(providerKey).matches("[A-Za-z0-9_-]{43}");
    // Stable across releases: a change here would turn every in-flight retry into a new send.
    assertThat(providerKey).isEqualTo(IdempotencyKey.providerKey("otp:user_42:challenge_9f3a"));
    assertThat(providerKey).isNotEqualTo(IdempotencyKey.providerKey("otp:user_42:challenge_9f3b"));
    assertThat(providerKey).isNotEqualTo(IdempotencyKey.digest("otp:user_42:challenge_9f3a"));
  }

  @Test
  void providerKeyAndUuidAreFixedForAGivenKey() {
    String key = "otp:user_42:challenge_9f3a";

    assertThat(IdempotencyKey.providerKey(key))
        .isEqualTo(Digests.base64url(Digests.sha256("provider\0" + key)));
    assertThat(Digests.providerUuid(key)).isEqualTo(Digests.providerUuid(key));
    assertThat(Digests.providerUuid(key).toString())
        .matches("[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");
    assertThat(Digests.providerUuid(key)).isNotEqualTo(Digests.providerUuid(key + "x"));
  }

  @Test
  void providerUuidMatchesTheVersion5Algorithm() {
    // RFC 9562 test vector: "www.example.com" in the DNS namespace.
    java.util.UUID dns = java.util.UUID.fromString("6ba7b810-9dad-11d1-80b4-00c04fd430c8");
    assertThat(uuid5(dns, "www.example.com"))
        .isEqualTo(java.util.UUID.fromString("2ed6657d-e927-568b-95e1-2665a8aea6a2"));
  }

  /** The same steps as Digests.providerUuid, with the namespace as a parameter, checked above. */
  private static java.util.UUID uuid5(java.util.UUID namespace, String name) {
    try {
      var sha1 = java.security.MessageDigest.getInstance("SHA-1");
      var ns = java.nio.ByteBuffer.allocate(16);
      ns.putLong(namespace.getMostSignificantBits()).putLong(namespace.getLeastSignificantBits());
      sha1.update(ns.array());
      byte[] hash = sha1.digest(name.getBytes(java.nio.charset.StandardCharsets.UTF_8));
      hash[6] = (byte) ((hash[6] & 0x0f) | 0x50);
      hash[8] = (byte) ((hash[8] & 0x3f) | 0x80);
      var bits = java.nio.ByteBuffer.wrap(hash, 0, 16);
      return new java.util.UUID(bits.getLong(), bits.getLong());
    } catch (java.security.NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  @Test
  void derivedKeyIgnoresFactOrderAndIsStable() {
    Instant created = Instant.parse("2030-05-01T10:15:00Z");
    String a =
        IdempotencyKey.derive("order-shipped")
            .fact("user", "user_42")
            .fact("template", "shipped-v2")
            .fact("order", 1234)
            .window(created, Duration.ofHours(24))
            .build();
    String b =
        IdempotencyKey.derive("order-shipped")
            .fact("order", "1234")
            .fact("user", "user_42")
            .fact("template", "shipped-v2")
            .window(created.plusSeconds(3600), Duration.ofHours(24))
            .build();

    assertThat(a)
        .isEqualTo(b)
        .startsWith("order-shipped:")
        .matches("order-shipped:[A-Za-z0-9_-]{43}");
  }

  @Test
  void derivedKeyChangesWithAnyFactOrTheWindowBucket() {
    Instant created = Instant.parse("2030-05-01T10:15:00Z");
    String base = derived("user_42", "1234", created);

    assertThat(derived("user_43", "1234", created)).isNotEqualTo(base);
    assertThat(derived("user_42", "1235", created)).isNotEqualTo(base);
    assertThat(derived("user_42", "1234", created.plus(Duration.ofDays(1)))).isNotEqualTo(base);
    // Facts are length-prefixed: moving characters between facts changes the key.
    assertThat(IdempotencyKey.derive("n").fact("a", "bc").fact("b", "d").build())
        .isNotEqualTo(IdempotencyKey.derive("n").fact("a", "b").fact("b", "cd").build());
  }

  private static String derived(String user, String order, Instant created) {
    return IdempotencyKey.derive("order-shipped")
        .fact("user", user)
        .fact("order", order)
        .window(created, Duration.ofHours(24))
        .build();
  }

  @Test
  void derivedKeyRefusesMisuse() {
    assertThatThrownBy(() -> IdempotencyKey.derive("a:b"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("namespace");
    assertThatThrownBy(() -> IdempotencyKey.derive("n").build())
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("at least one fact");
    assertThatThrownBy(() -> IdempotencyKey.derive("n").fact("user", 1).fact("user", 2))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("fact 'user' was already added");
    assertThatThrownBy(() -> IdempotencyKey.derive("n").fact("user", null))
        .isInstanceOf(NullPointerException.class)
        .hasMessageContaining("user");
    assertThatThrownBy(() -> IdempotencyKey.derive("n").window(Instant.EPOCH, Duration.ZERO))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("window size must be positive");
  }

  @Test
  void derivedKeyRefusesFactsThatUtf8CannotEncode() {
    // both would hash as "a?" after UTF-8 replacement, so they must not be accepted at all
    String loneHigh = "a\uD800";
    String loneLow = "a\uDC00";

    assertThatThrownBy(() -> IdempotencyKey.derive("n").fact("user", loneHigh))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("value of fact 'user' has an unpaired surrogate at index 1");
    assertThatThrownBy(() -> IdempotencyKey.derive("n").fact(loneLow, "x"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("fact name has an unpaired surrogate at index 1");
    assertThat(IdempotencyKey.derive("n").fact("user", "a\uD83D\uDE00").build())
        .as("a paired surrogate (an emoji) is fine")
        .startsWith("n:");
  }
}
