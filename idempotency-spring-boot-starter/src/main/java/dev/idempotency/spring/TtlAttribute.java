package dev.idempotency.spring;

import dev.idempotency.IdempotencyWindows;
import java.time.Duration;
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
    Duration ttl;
    String source;
    if (text.isEmpty()) {
      ttl = defaultTtl;
      source = "idempotency.default-ttl (" + defaultTtl + ")";
    } else {
      source = "ttl '" + text + "'";
      try {
        ttl = DurationStyle.detectAndParse(text.strip());
      } catch (IllegalArgumentException e) {
        throw new IllegalStateException(
            where + ": " + source + " is not a duration such as PT72H or 72h");
      }
    }
    try {
      IdempotencyWindows.requireValidTtl(ttl);
    } catch (IllegalArgumentException e) {
      throw new IllegalStateException(where + ": " + source + ": " + e.getMessage());
    }
    if (lease != null && ttl.compareTo(lease) <= 0) {
      throw new IllegalStateException(
          where
              + ": "
              + source
              + " must be longer than the lease (idempotency.lease = "
              + lease
              + "), or every call would fail");
    }
    return ttl;
  }
}
