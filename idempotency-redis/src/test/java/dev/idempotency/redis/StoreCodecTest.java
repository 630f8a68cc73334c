package dev.idempotency.redis;

import static org.assertj.core.api.Assertions.assertThat;

import io.lettuce.core.codec.ByteArrayCodec;
import io.lettuce.core.codec.RedisCodec;
import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.protocol.CommandArgs;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/**
 * The store's codec sends the bytes the composed codec every release used sent ({@code
 * RedisCodec.of(StringCodec.UTF8, ByteArrayCodec.INSTANCE)}), now written straight into the
 * command's buffer with exact sizes: a wrong size would break the protocol, not just the value.
 */
class StoreCodecTest {

  private static final RedisCodec<String, byte[]> COMPOSED =
      RedisCodec.of(StringCodec.UTF8, ByteArrayCodec.INSTANCE);

  @Test
  void commandsAreEncodedAsTheComposedCodecEncodedThem() {
    String[] keys = {
      "idem:AqdU7WkguQoaOnePDrP4CQ",
      "",
      "ключ:1",
      "😀 key",
      "half \ud83d surrogate",
      "x".repeat(5000)
    };
    byte[][] values = {
      new byte[0], "v".getBytes(StandardCharsets.UTF_8), new byte[] {0, -1, '\r', '\n', ':'}, null
    };
    for (String key : keys) {
      for (byte[] value : values) {
        assertThat(encoded(StoreCodec.INSTANCE, key, value))
            .as("%s", key)
            .isEqualTo(encoded(COMPOSED, key, value));
      }
    }
  }

  @Test
  void repliesAreDecodedAsTheComposedCodecDecodedThem() {
    byte[] bytes = "ключ:1".getBytes(StandardCharsets.UTF_8);

    assertThat(StoreCodec.INSTANCE.decodeKey(java.nio.ByteBuffer.wrap(bytes))).isEqualTo("ключ:1");
    assertThat(StoreCodec.INSTANCE.decodeValue(java.nio.ByteBuffer.wrap(bytes))).isEqualTo(bytes);
    assertThat(StoreCodec.INSTANCE.encodeKey("ключ:1")).isEqualTo(COMPOSED.encodeKey("ключ:1"));
  }

  private static byte[] encoded(RedisCodec<String, byte[]> codec, String key, byte[] value) {
    CommandArgs<String, byte[]> args = new CommandArgs<>(codec).addKey(key).addValue(value);
    args.add("EX").add(10);
    ByteBuf buffer = Unpooled.buffer();
    try {
      args.encode(buffer);
      byte[] bytes = new byte[buffer.readableBytes()];
      buffer.readBytes(bytes);
      return bytes;
    } finally {
      buffer.release();
    }
  }
}
