package dev.idempotency;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * The envelope the guard wraps around what it stores, so that a store keeps opaque bytes and the
 * guard can tell a null result, a value, a result that was not stored, and a permanent failure. The
 * first byte is a tag; the format is part of the on-disk contract and only ever extended.
 */
final class Payloads {

  static final byte NULL_RESULT = 0;
  static final byte VALUE = 1;
  static final byte NOT_STORED = 2;
  static final byte FAILURE = 3;

  private Payloads() {}

  static byte[] nullResult() {
    return new byte[] {NULL_RESULT};
  }

  static byte[] value(byte[] encoded) {
    byte[] payload = new byte[encoded.length + 1];
    payload[0] = VALUE;
    System.arraycopy(encoded, 0, payload, 1, encoded.length);
    return payload;
  }

  /** Why a sent result is not stored, cut to fit {@code maxBytes} in all. */
  static byte[] notStored(String reason, int maxBytes) {
    return tagged(NOT_STORED, reason, maxBytes);
  }

  /**
   * A permanent failure: its class name and message, cut to fit {@code maxBytes} in all (at most
   * {@link #MAX_FAILURE_BYTES}), so that a long message never keeps a failure from being stored.
   */
  static byte[] failure(Throwable failure, int maxBytes) {
    String message = failure.getMessage() == null ? "" : failure.getMessage();
    return tagged(
        FAILURE,
        failure.getClass().getName() + '\n' + message,
        Math.min(maxBytes, MAX_FAILURE_BYTES));
  }

  /** The most bytes a stored failure takes, whatever the store accepts: 4 KiB. */
  static final int MAX_FAILURE_BYTES = 4096;

  static byte tag(byte[] payload) {
    return payload == null || payload.length == 0 ? -1 : payload[0];
  }

  static byte[] body(byte[] payload) {
    return Arrays.copyOfRange(payload, 1, payload.length);
  }

  static String text(byte[] payload) {
    return new String(payload, 1, payload.length - 1, StandardCharsets.UTF_8);
  }

  private static byte[] tagged(byte tag, String text, int maxBytes) {
    byte[] payload = value(utf8Prefix(text, Math.max(0, maxBytes - 1)));
    payload[0] = tag;
    return payload;
  }

  /** The UTF-8 bytes of the longest prefix of {@code text} that fits, never half a character. */
  static byte[] utf8Prefix(String text, int maxBytes) {
    byte[] bytes = text.getBytes(StandardCharsets.UTF_8);
    if (bytes.length <= maxBytes) {
      return bytes;
    }
    int end = maxBytes;
    while (end > 0 && (bytes[end] & 0xC0) == 0x80) {
      end--; // bytes[end] continues a character that starts before it: cut before that character
    }
    return Arrays.copyOf(bytes, end);
  }

  /** The exception a replayed permanent failure throws: its stored type and message. */
  static IdempotencyStoredFailureException storedFailure(String keyId, byte[] payload) {
    String text = tag(payload) == FAILURE ? text(payload) : "\n";
    int newline = text.indexOf('\n');
    String type = newline < 0 ? text : text.substring(0, newline);
    String message = newline < 0 ? "" : text.substring(newline + 1);
    return new IdempotencyStoredFailureException(keyId, type, message);
  }

  /**
   * The result a completed payload holds: {@code null}, or the value decoded by {@code codec}.
   *
   * @throws IdempotencyResultUnavailableException if the result was not stored, or does not decode
   */
  static <T> T decode(String keyId, byte[] payload, ResultCodec<T> codec) {
    switch (tag(payload)) {
      case NULL_RESULT:
        return null;
      case VALUE:
        try {
          return codec.decode(body(payload));
        } catch (Exception e) {
          throw new IdempotencyResultUnavailableException(
              keyId,
              "the stored result could not be decoded by "
                  + codec.getClass().getName()
                  + "; did the result type change?",
              e);
        }
      case NOT_STORED:
        throw new IdempotencyResultUnavailableException(keyId, text(payload), null);
      default:
        throw new IdempotencyResultUnavailableException(
            keyId, "the stored payload has an unknown format", null);
    }
  }
}
