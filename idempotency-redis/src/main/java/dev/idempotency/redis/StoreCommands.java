package dev.idempotency.redis;

import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.SetArgs;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * The few Redis commands the store sends, each returning Lettuce's own future (so that cancelling
 * it cancels the command), with one implementation for a standalone or Sentinel connection and one
 * for a cluster. Everything above this interface is the same for both.
 */
interface StoreCommands extends AutoCloseable {

  /** {@code SET key value <args> GET}: the previous value, or {@code null}. */
  CompletableFuture<byte[]> setGet(String key, byte[] value, SetArgs args);

  /** {@code EVALSHA} with a {@link ScriptOutputType#MULTI} reply. */
  CompletableFuture<List<Object>> evalsha(String sha, String[] keys, byte[]... args);

  /** {@code EVAL} with a {@link ScriptOutputType#MULTI} reply, after a {@code NOSCRIPT}. */
  CompletableFuture<List<Object>> eval(String script, String[] keys, byte[]... args);

  /**
   * {@code WAIT replicas timeout} on the connection that wrote {@code key}: on a cluster that is
   * the connection to the master of its slot, since {@code WAIT} only counts the writes of the
   * connection it is sent on.
   */
  CompletableFuture<Long> waitForReplication(String key, int replicas, long timeoutMillis);

  /** The {@code server} section of {@code INFO}, of one node. */
  CompletableFuture<String> serverInfo();

  /** The SHA-1 Redis gives a script, computed locally. */
  String digest(String script);

  /** Whether one script call may touch many keys (standalone); not on a cluster. */
  boolean multiKeyScripts();

  /** Closes the connection the store opened; the client stays open. */
  @Override
  void close();
}
