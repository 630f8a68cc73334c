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

  static byte[] notStored(String reason) {
    return tagged(NOT_STORED, reason);
  }

  static byte[] failure(Throwable failure) {
    String message = failure.getMessage() == null ? "" : failure.getMessage();
    return tagged(FAILURE, failure.getClass().getName() + '\n' + message);
  }

  static byte tag(byte[] payload) {
    return payload == null || payload.length == 0 ? -1 : payload[0];
  }

  static byte[] body(byte[] payload) {
    return Arrays.copyOfRange(payload, 1, payload.length);
  }

  static String text(byte[] payload) {
    return new String(payload, 1, payload.length - 1, StandardCharsets.UTF_8);
  }

  private static byte[] tagged(byte tag, String text) {
    byte[] payload = value(text.getBytes(StandardCharsets.UTF_8));
    payload[0] = tag;
    return payload;
  }
}
