package dev.idempotency;

import java.nio.charset.StandardCharsets;
import java.util.Objects;
import java.util.function.Function;

/**
 * Turns a sender's result into bytes for the store and back. The guard stores {@code null} results
 * itself, so a codec never sees {@code null}. Java native serialization is never used: pick a
 * format that survives deploys (a string, JSON, Protobuf).
 *
 * <p>Implementations must be thread-safe.
 *
 * @param <T> the result type
 */
public interface ResultCodec<T> {

  /**
   * Encodes a result.
   *
   * @param value the result, never null
   * @return its bytes
   * @throws Exception if it cannot be encoded; the send still counts as done (the record becomes
   *     completed without a stored result)
   */
  byte[] encode(T value) throws Exception;

  /**
   * Decodes a stored result.
   *
   * @param bytes the stored bytes, never null
   * @return the result
   * @throws Exception if they cannot be decoded; the caller gets {@link
   *     IdempotencyResultUnavailableException} and nothing is sent
   */
  T decode(byte[] bytes) throws Exception;

  /**
   * UTF-8 strings: the codec of {@link IdempotencyGuard#execute(String, java.time.Duration,
   * Sender)}.
   *
   * @return the string codec
   */
  static ResultCodec<String> string() {
    return StringCodec.INSTANCE;
  }

  /**
   * Byte arrays, stored as they are.
   *
   * @return the identity codec for {@code byte[]}
   */
  static ResultCodec<byte[]> bytes() {
    return BytesCodec.INSTANCE;
  }

  /**
   * A codec through a text form, for example a JSON mapper:
   *
   * <pre>{@code
   * ResultCodec<Receipt> json = ResultCodec.ofText(mapper::writeValueAsString,
   *     text -> mapper.readValue(text, Receipt.class));
   * }</pre>
   *
   * @param toText turns a result into text
   * @param fromText turns text back into a result
   * @param <T> the result type
   * @return a codec storing the text as UTF-8
   */
  static <T> ResultCodec<T> ofText(
      ThrowingFunction<T, String> toText, ThrowingFunction<String, T> fromText) {
    Objects.requireNonNull(toText, "toText");
    Objects.requireNonNull(fromText, "fromText");
    return new ResultCodec<>() {
      @Override
      public byte[] encode(T value) throws Exception {
        return toText.apply(value).getBytes(StandardCharsets.UTF_8);
      }

      @Override
      public T decode(byte[] bytes) throws Exception {
        return fromText.apply(new String(bytes, StandardCharsets.UTF_8));
      }
    };
  }

  /**
   * A {@link Function} that may throw, such as a JSON mapper's methods.
   *
   * @param <A> the argument type
   * @param <R> the result type
   */
  @FunctionalInterface
  interface ThrowingFunction<A, R> {
    /**
     * Applies the function.
     *
     * @param argument the argument
     * @return the result
     * @throws Exception if it fails
     */
    R apply(A argument) throws Exception;
  }
}

/** UTF-8 strings; also refuses, with a clear message, results that are not strings. */
enum StringCodec implements ResultCodec<String> {
  INSTANCE;

  @Override
  public byte[] encode(String value) {
    return value.getBytes(StandardCharsets.UTF_8);
  }

  @Override
  public String decode(byte[] bytes) {
    return new String(bytes, StandardCharsets.UTF_8);
  }
}

/** Byte arrays as they are, copied so callers cannot change stored bytes. */
enum BytesCodec implements ResultCodec<byte[]> {
  INSTANCE;

  @Override
  public byte[] encode(byte[] value) {
    return value.clone();
  }

  @Override
  public byte[] decode(byte[] bytes) {
    return bytes.clone();
  }
}
