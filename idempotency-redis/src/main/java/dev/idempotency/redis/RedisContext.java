package dev.idempotency.redis;

import java.time.Duration;

/**
 * What a store's operations share: the connection's commands, the loaded scripts, the key layout
 * ({@code prefix + keyId}) and the time bound of one operation.
 */
final class RedisContext {

  final ConnectingCommands commands;
  final Scripts scripts;
  private final String keyPrefix;
  private final Duration operationBound;

  RedisContext(
      ConnectingCommands commands, Scripts scripts, String keyPrefix, Duration operationBound) {
    this.commands = commands;
    this.scripts = scripts;
    this.keyPrefix = keyPrefix;
    this.operationBound = operationBound;
  }

  /** A new operation, bounded by the store's operation timeout (plus the replica wait, if any). */
  Operation operation(String name) {
    return new Operation(name, operationBound);
  }

  /**
   * A new operation that only the calling thread waits for ({@link Operation#await}), with the same
   * bound.
   */
  Operation awaitedOperation(String name) {
    return Operation.awaited(name, operationBound);
  }

  String redisKey(String keyId) {
    return keyPrefix + keyId;
  }
}
