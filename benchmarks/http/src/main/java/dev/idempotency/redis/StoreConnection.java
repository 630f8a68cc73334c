package dev.idempotency.redis;

import io.lettuce.core.api.StatefulRedisConnection;
import java.lang.reflect.Field;
import java.time.Duration;

/**
 * The Lettuce connection a {@link RedisKeyStore} opened, for the benchmark's floor handler ({@code
 * HttpBenchApplication}'s {@code /floor}): it sends its commands on the very connection (and so the
 * client, the event loop and the codec) the store sends its own on. In the store's package to reach
 * its package-private classes; the two private fields it reads are read by reflection. Benchmark
 * code only.
 */
public final class StoreConnection {

  private StoreConnection() {}

  /**
   * Waits for the store's connection and returns it.
   *
   * @param store a standalone (or Sentinel) Redis store
   * @return its connection, with the store's codec (UTF-8 keys, byte-array values)
   */
  @SuppressWarnings("unchecked")
  public static StatefulRedisConnection<String, byte[]> of(RedisKeyStore store) {
    if (!store.awaitConnection(Duration.ofSeconds(60))) {
      throw new IllegalStateException("the Redis store did not connect within 60 s");
    }
    ConnectingCommands commands = (ConnectingCommands) read(RedisKeyStore.class, "commands", store);
    StoreCommands opened = commands.connection().join().commands();
    return (StatefulRedisConnection<String, byte[]>)
        read(LettuceCommands.class, "connection", opened);
  }

  private static Object read(Class<?> type, String name, Object from) {
    try {
      Field field = type.getDeclaredField(name);
      field.setAccessible(true);
      return field.get(from);
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("cannot read " + type.getSimpleName() + "." + name, e);
    }
  }
}
