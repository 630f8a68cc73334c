package dev.idempotency;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;

/**
 * Builds and checks idempotency keys. Keys are plain {@code String}s, as every method of the guard
 * takes them: this class is where they are made ({@code String key = IdempotencyKey.of(..)}), not a
 * type of its own.
 *
 * <p>A key must be stable across retries: the producer sends the same key on every attempt. Build
 * it from the business facts that identify the send, never from a random value or the time of the
 * retry.
 *
 * <pre>{@code
 * String key = IdempotencyKey.of("otp", "user_42", "challenge_9f3a");  // "otp:user_42:challenge_9f3a"
 *
 * String derived = IdempotencyKey.derive("order-shipped")             // no natural key
 *     .fact("user", userId)
 *     .fact("template", "shipped-v2")
 *     .fact("order", orderId)
 *     .window(event.createdAt(), Duration.ofHours(24))
 *     .build();
 * }</pre>
 *
 * <p>A valid key has 1 to {@value #MAX_LENGTH} characters, is not blank, and contains no ISO
 * control characters and no unpaired surrogates.
 */
public final class IdempotencyKey {

  /** The longest key accepted, in characters. */
  public static final int MAX_LENGTH = 1024;

  /** The separator between the parts of {@link #of}. */
  public static final char SEPARATOR = ':';

  private static final char ESCAPE = '\\';

  private IdempotencyKey() {}

  /**
   * Joins parts with {@code ':'}, escaping {@code ':'} and {@code '\'} inside a part, so that two
   * different tuples never give the same key: {@code of("a:b", "c")} is {@code a\:b:c} and {@code
   * of("a", "b:c")} is {@code a:b\:c}.
   *
   * @param parts at least one part, none null
   * @return the key, valid for {@link IdempotencyGuard#execute}
   * @throws IllegalArgumentException if there are no parts or the key is not valid
   * @throws NullPointerException if the array or a part is null
   */
  public static String of(String... parts) {
    Objects.requireNonNull(parts, "parts");
    if (parts.length == 0) {
      throw new IllegalArgumentException("parts must not be empty");
    }
    StringBuilder key = new StringBuilder();
    for (int i = 0; i < parts.length; i++) {
      String part = Objects.requireNonNull(parts[i], () -> "parts must not contain null");
      if (i > 0) {
        key.append(SEPARATOR);
      }
      for (int c = 0; c < part.length(); c++) {
        char ch = part.charAt(c);
        if (ch == SEPARATOR || ch == ESCAPE) {
          key.append(ESCAPE);
        }
        key.append(ch);
      }
    }
    return requireValid(key.toString());
  }

  /**
   * Starts a derived key for a producer that has no natural key: a namespace plus a hash of named
   * business facts and, optionally, a window bucket.
   *
   * @param namespace a readable prefix such as {@code "order-shipped"}; not blank, no separator
   * @return a builder
   */
  public static Derived derive(String namespace) {
    return new Derived(namespace);
  }

  /** The longest operation name: a low-cardinality word fit for a metrics tag. */
  private static final int MAX_OPERATION_LENGTH = 64;

  /**
   * The operation a key belongs to, for events and metrics: its namespace, the first part given to
   * {@link #of} or the name of {@link #derive}, when that is a short word ({@code otp}, {@code
   * order-shipped}: up to 64 characters of {@code [A-Za-z0-9_.-]}); otherwise {@value
   * #DEFAULT_OPERATION}. Never the key itself: a key without a namespace is not a name.
   *
   * @param key a valid key
   * @return the operation name
   */
  public static String operationOf(String key) {
    int separator = key.indexOf(SEPARATOR);
    return separator > 0 && isOperationName(key, separator)
        ? key.substring(0, separator)
        : DEFAULT_OPERATION;
  }

  /**
   * Whether a name may serve as an operation name: 1 to 64 characters of {@code [A-Za-z0-9_.-]}.
   *
   * @param name the candidate
   * @return whether it qualifies
   */
  public static boolean isOperationName(String name) {
    return name != null && isOperationName(name, name.length());
  }

  /**
   * Whether the first {@code length} characters of {@code text} are an operation name. A loop, not
   * a regular expression: every call's key goes through {@link #operationOf}.
   */
  private static boolean isOperationName(String text, int length) {
    if (length < 1 || length > MAX_OPERATION_LENGTH) {
      return false;
    }
    for (int i = 0; i < length; i++) {
      char ch = text.charAt(i);
      boolean allowed =
          (ch >= 'a' && ch <= 'z')
              || (ch >= 'A' && ch <= 'Z')
              || (ch >= '0' && ch <= '9')
              || ch == '_'
              || ch == '.'
              || ch == '-';
      if (!allowed) {
        return false;
      }
    }
    return true;
  }

  /** The operation of a key with no usable namespace. */
  public static final String DEFAULT_OPERATION = "default";

  /**
   * Checks a key and returns it.
   *
   * @param key the key
   * @return the same key
   * @throws NullPointerException if it is null
   * @throws IllegalArgumentException naming what is wrong, if it is not valid
   */
  public static String requireValid(String key) {
    Objects.requireNonNull(key, "key must not be null");
    if (key.isEmpty() || key.isBlank()) {
      throw new IllegalArgumentException("key must not be blank");
    }
    if (key.length() > MAX_LENGTH) {
      throw new IllegalArgumentException(
          "key must be at most " + MAX_LENGTH + " characters, was " + key.length());
    }
    for (int i = 0; i < key.length(); i++) {
      char ch = key.charAt(i);
      if (Character.isISOControl(ch)) {
        throw new IllegalArgumentException(
            "key must not contain control characters; found U+"
                + String.format("%04X", (int) ch)
                + " at index "
                + i);
      }
      if (isUnpairedSurrogateAt(key, i)) {
        throw new IllegalArgumentException("key has an unpaired surrogate at index " + i);
      }
    }
    return key;
  }

  /**
   * The index of the first unpaired surrogate, or -1. UTF-8 cannot encode one: it would be hashed
   * as a replacement character, so two different strings could hash the same.
   */
  private static int unpairedSurrogate(String text) {
    for (int i = 0; i < text.length(); i++) {
      if (isUnpairedSurrogateAt(text, i)) {
        return i;
      }
    }
    return -1;
  }

  private static boolean isUnpairedSurrogateAt(String text, int i) {
    char ch = text.charAt(i);
    if (Character.isHighSurrogate(ch)) {
      return i + 1 >= text.length() || !Character.isLowSurrogate(text.charAt(i + 1));
    }
    return Character.isLowSurrogate(ch)
        && (i == 0 || !Character.isHighSurrogate(text.charAt(i - 1)));
  }

  /**
   * The provider idempotency key derived from a key, as {@link SendContext#providerKey()} gives it:
   * 43 characters of {@code [A-Za-z0-9_-]}, stable across processes and releases.
   *
   * @param key a valid key
   * @return the provider key
   */
  public static String providerKey(String key) {
    return Digests.providerKey(requireValid(key));
  }

  /**
   * The digest under which stores keep the key, as events and exception messages name it.
   *
   * @param key a valid key
   * @return the key digest
   */
  public static String digest(String key) {
    return Digests.keyId(requireValid(key));
  }

  /**
   * A derived key under construction. Facts are sorted by name, so the order of {@link #fact} calls
   * does not matter; each fact name may appear once. Not thread-safe.
   */
  public static final class Derived {
    private final String namespace;
    private final Map<String, String> facts = new TreeMap<>();
    private long bucket = Long.MIN_VALUE;
    private Duration bucketSize;

    private Derived(String namespace) {
      Objects.requireNonNull(namespace, "namespace");
      if (namespace.isBlank() || namespace.indexOf(SEPARATOR) >= 0) {
        throw new IllegalArgumentException(
            "namespace must not be blank and must not contain '" + SEPARATOR + "'");
      }
      requireValid(namespace);
      this.namespace = namespace;
    }

    /**
     * Adds a named business fact: the user, the template, the business id.
     *
     * @param name the fact's name, not blank
     * @param value its value, rendered with {@link String#valueOf(Object)}; not null
     * @return this builder
     * @throws IllegalArgumentException if the name is blank or was added before, or if the name or
     *     the rendered value has an unpaired surrogate (which UTF-8 cannot encode, so two different
     *     facts could hash the same)
     */
    public Derived fact(String name, Object value) {
      Objects.requireNonNull(name, "name");
      Objects.requireNonNull(value, () -> "value of fact '" + name + "' must not be null");
      if (name.isBlank()) {
        throw new IllegalArgumentException("fact name must not be blank");
      }
      String text = String.valueOf(value);
      if (unpairedSurrogate(name) >= 0) {
        throw new IllegalArgumentException(
            "fact name has an unpaired surrogate at index " + unpairedSurrogate(name));
      }
      if (unpairedSurrogate(text) >= 0) {
        throw new IllegalArgumentException(
            "value of fact '"
                + name
                + "' has an unpaired surrogate at index "
                + unpairedSurrogate(text));
      }
      if (facts.putIfAbsent(name, text) != null) {
        throw new IllegalArgumentException("fact '" + name + "' was already added");
      }
      return this;
    }

    /**
     * Adds a dedupe window bucket computed from a timestamp the caller owns, such as the event's
     * creation time. Never pass the time of the retry: each retry would land in its own bucket. Two
     * events in the same bucket of {@code size} get the same key.
     *
     * @param eventTime the business timestamp
     * @param size the bucket size, positive
     * @return this builder
     */
    public Derived window(Instant eventTime, Duration size) {
      Objects.requireNonNull(eventTime, "eventTime");
      Objects.requireNonNull(size, "size");
      if (size.isNegative() || size.isZero()) {
        throw new IllegalArgumentException("window size must be positive, was " + size);
      }
      long sizeMillis = size.toMillis();
      if (sizeMillis == 0) {
        throw new IllegalArgumentException("window size must be at least one millisecond");
      }
      this.bucket = Math.floorDiv(eventTime.toEpochMilli(), sizeMillis);
      this.bucketSize = size;
      return this;
    }

    /**
     * Builds {@code namespace:hash}, where the hash is base64url SHA-256 over the length-prefixed
     * facts and the bucket.
     *
     * @return the key
     * @throws IllegalStateException if no fact was added
     */
    public String build() {
      if (facts.isEmpty()) {
        throw new IllegalStateException("a derived key needs at least one fact");
      }
      StringBuilder canonical = new StringBuilder();
      facts.forEach(
          (name, value) -> appendLengthPrefixed(appendLengthPrefixed(canonical, name), value));
      if (bucketSize != null) {
        canonical.append("#window:").append(bucketSize.toMillis()).append('/').append(bucket);
      }
      return namespace + SEPARATOR + Digests.base64url(Digests.sha256(canonical.toString()));
    }

    private static StringBuilder appendLengthPrefixed(StringBuilder target, String text) {
      return target
          .append(text.getBytes(StandardCharsets.UTF_8).length)
          .append(':')
          .append(text)
          .append(';');
    }
  }
}
