package dev.idempotency.spring;

import dev.idempotency.IdempotencyWindows;
import java.time.Duration;
import java.util.Objects;
import java.util.function.Function;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.convert.DurationStyle;

/**
 * The {@code ttl} attribute of {@link Idempotent} and {@link
 * dev.idempotency.spring.web.IdempotentEndpoint}, read as Spring Boot reads durations in properties
 * ({@code PT72H}, {@code 72h}, {@code 30m}; a bare number is milliseconds) and checked when the
 * application starts: positive, at most 365 days, longer than the lease. For the starter's
 * integrations; stateless.
 */
public final class TtlAttribute {

  private TtlAttribute() {}

  /**
   * One default window for every operation.
   *
   * @param defaultTtl the window ({@code idempotency.default-ttl})
   * @return the window by operation name: always {@code defaultTtl}'s
   */
  public static Function<@Nullable String, Duration> sameForAll(Supplier<Duration> defaultTtl) {
    Objects.requireNonNull(defaultTtl, "defaultTtl must not be null");
    return operation -> defaultTtl.get();
  }

  /**
   * Parses and checks a ttl attribute.
   *
   * @param where the annotated element, for the message ({@code "@Idempotent on a.B.send(..)"})
   * @param text the attribute, empty for the default
   * @param defaultTtl the window when the attribute is empty ({@code idempotency.default-ttl})
   * @param lease the guard's lease, which the window must be longer than
   * @return the window
   * @throws IllegalStateException naming the element and the problem
   */
  public static Duration parse(
      String where, String text, Duration defaultTtl, @Nullable Duration lease) {
    return parse(where, text, defaultTtl, "idempotency.default-ttl (" + defaultTtl + ")", lease);
  }

  /**
   * Parses and checks a ttl attribute whose default is an operation's own ({@code
   * idempotency.operations.<name>.ttl}) or else {@code idempotency.default-ttl}.
   *
   * @param where the annotated element, for the message
   * @param text the attribute, empty for the default
   * @param operation the operation's name, or {@code null} if it has none of its own
   * @param ttlOf the default window by operation name ({@code null} for none)
   * @param lease the guard's lease, which the window must be longer than
   * @return the window
   * @throws IllegalStateException naming the element and the problem
   */
  public static Duration parse(
      String where,
      String text,
      @Nullable String operation,
      Function<@Nullable String, Duration> ttlOf,
      @Nullable Duration lease) {
    if (!text.isEmpty()) {
      return parse(where, text, Duration.ZERO, lease);
    }
    Duration ttl = ttlOf.apply(operation);
    String source =
        operation == null
            ? "idempotency.default-ttl (" + ttl + ")"
            : "idempotency.operations."
                + operation
                + ".ttl or idempotency.default-ttl ("
                + ttl
                + ")";
    return parse(where, text, ttl, source, lease);
  }

  private static Duration parse(
      String where,
      String text,
      Duration defaultTtl,
      String defaultSource,
      @Nullable Duration lease) {
    Duration ttl;
    String source;
    if (text.isEmpty()) {
      ttl = defaultTtl;
      source = defaultSource;
    } else {
      source = "ttl '" + text + "'";
      try {
        ttl = DurationStyle.detectAndParse(text.strip());
      } catch (IllegalArgumentException e) {
        throw new IdempotencyConfigurationException(
            where + ": " + source + " is not a duration such as PT72H or 72h.",
            "Write the window in Spring Boot's duration formats (PT72H, 72h, 30m).");
      }
    }
    try {
      IdempotencyWindows.requireValidTtl(ttl);
    } catch (IllegalArgumentException e) {
      throw new IdempotencyConfigurationException(
          where + ": " + source + ": " + e.getMessage() + ".",
          "Give it a window of at least 1 ms and at most 365 days (its ttl, or the property it"
              + " names).");
    }
    if (lease != null && ttl.compareTo(lease) <= 0) {
      throw new IdempotencyConfigurationException(
          where
              + ": "
              + source
              + " must be longer than the lease (idempotency.lease = "
              + lease
              + "), or every call would fail.",
          "Give it a window longer than the lease (its ttl, or the property it names), or"
              + " shorten idempotency.lease: the lease bounds how long a crashed sender's claim"
              + " blocks its key, and every window must outlast it.");
    }
    return ttl;
  }
}
