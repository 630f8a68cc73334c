package dev.idempotency.redis;

import io.lettuce.core.codec.ByteArrayCodec;
import io.lettuce.core.codec.RedisCodec;
import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.codec.ToByteBufEncoder;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import java.nio.ByteBuffer;

/**
 * The store's codec: keys as UTF-8 strings, values as bytes, the same bytes as {@code
 * RedisCodec.of(StringCodec.UTF8, ByteArrayCodec.INSTANCE)}. It also writes both straight into
 * Lettuce's output buffer with their exact sizes ({@link ToByteBufEncoder}), where the composed
 * codec made a {@link ByteBuffer} of every key and value of every command (issue 39).
 */
final class StoreCodec implements RedisCodec<String, byte[]>, ToByteBufEncoder<String, byte[]> {

  static final StoreCodec INSTANCE = new StoreCodec();

  private StoreCodec() {}

  @Override
  public String decodeKey(ByteBuffer bytes) {
    return StringCodec.UTF8.decodeKey(bytes);
  }

  @Override
  public byte[] decodeValue(ByteBuffer bytes) {
    return ByteArrayCodec.INSTANCE.decodeValue(bytes);
  }

  @Override
  public ByteBuffer encodeKey(String key) {
    return StringCodec.UTF8.encodeKey(key);
  }

  @Override
  public ByteBuffer encodeValue(byte[] value) {
    return ByteArrayCodec.INSTANCE.encodeValue(value);
  }

  @Override
  public void encodeKey(String key, ByteBuf target) {
    if (key != null) {
      ByteBufUtil.writeUtf8(target, key);
    }
  }

  @Override
  public void encodeValue(byte[] value, ByteBuf target) {
    if (value != null) {
      target.writeBytes(value);
    }
  }

  /** The exact size {@link #encodeKey(String, ByteBuf)} or {@link #encodeValue} writes. */
  @Override
  public int estimateSize(Object keyOrValue) {
    if (keyOrValue == null) {
      return 0;
    }
    if (keyOrValue instanceof byte[] bytes) {
      return bytes.length;
    }
    return ByteBufUtil.utf8Bytes((CharSequence) keyOrValue);
  }

  @Override
  public boolean isEstimateExact() {
    return true;
  }
}
