package dev.idempotency.spring;

import dev.idempotency.RequestFingerprints;
import java.math.BigDecimal;
import java.math.BigInteger;

/**
 * The numbers of {@link CanonicalJsonWriter}, in the canonical form of {@link
 * RequestFingerprints#canonicalJson}: a {@code long} written digit by digit without a string (every
 * long has at most 19 digits: plain, as RFC 8785's), a {@link BigInteger} or {@link BigDecimal} as
 * that form gives it. Stateless.
 */
final class CanonicalNumbers {

  /** The most bytes a {@code long} takes: a sign and 19 digits. */
  static final int MAX_LONG_LENGTH = 20;

  private CanonicalNumbers() {}

  /**
   * Writes {@code value} in {@code out} from {@code at}, which has room for {@link
   * #MAX_LONG_LENGTH} bytes; returns where it ends.
   */
  static int writeLong(byte[] out, int at, long value) {
    if (value == Long.MIN_VALUE) {
      return writeAscii(out, at, Long.toString(value));
    }
    if (value < 0) {
      out[at++] = '-';
      value = -value;
    }
    int digits = 1;
    for (long rest = value / 10; rest > 0; rest /= 10) {
      digits++;
    }
    for (int i = at + digits - 1; i >= at; i--) {
      out[i] = (byte) ('0' + value % 10);
      value /= 10;
    }
    return at + digits;
  }

  /** The canonical form of an integer too large for a {@code long}. */
  static String of(BigInteger value) {
    return RequestFingerprints.canonicalJson(value);
  }

  /** The canonical form of a decimal number. */
  static String of(BigDecimal value) {
    return RequestFingerprints.canonicalJson(value);
  }

  private static int writeAscii(byte[] out, int at, String text) {
    for (int i = 0; i < text.length(); i++) {
      out[at++] = (byte) text.charAt(i);
    }
    return at;
  }
}
