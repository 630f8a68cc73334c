package dev.idempotency.redis;

import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.SetArgs;
import io.lettuce.core.api.StatefulConnection;
import io.lettuce.core.api.async.RedisScriptingAsyncCommands;
import io.lettuce.core.api.async.RedisServerAsyncCommands;
import io.lettuce.core.api.async.RedisStringAsyncCommands;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * The {@link StoreCommands} a standalone and a cluster connection send the same way, through the
 * async command interfaces both of Lettuce's APIs share; subclasses add what differs.
 */
abstract class LettuceCommands implements StoreCommands {

  private final StatefulConnection<String, byte[]> connection;
  private final RedisStringAsyncCommands<String, byte[]> strings;
  private final RedisScriptingAsyncCommands<String, byte[]> scripting;
  private final RedisServerAsyncCommands<String, byte[]> server;

  <
          C extends
              RedisStringAsyncCommands<String, byte[]> & RedisScriptingAsyncCommands<String, byte[]>
                  & RedisServerAsyncCommands<String, byte[]>>
      LettuceCommands(StatefulConnection<String, byte[]> connection, C commands) {
    this.connection = connection;
    this.strings = commands;
    this.scripting = commands;
    this.server = commands;
  }

  @Override
  public CompletableFuture<byte[]> setGet(String key, byte[] value, SetArgs args) {
    return strings.setGet(key, value, args).toCompletableFuture();
  }

  @Override
  public CompletableFuture<List<Object>> evalsha(String sha, String[] keys, byte[]... args) {
    return scripting
        .<List<Object>>evalsha(sha, ScriptOutputType.MULTI, keys, args)
        .toCompletableFuture();
  }

  @Override
  public CompletableFuture<List<Object>> eval(String script, String[] keys, byte[]... args) {
    return scripting
        .<List<Object>>eval(script, ScriptOutputType.MULTI, keys, args)
        .toCompletableFuture();
  }

  @Override
  public CompletableFuture<String> serverInfo() {
    return server.info("server").toCompletableFuture();
  }

  @Override
  public String digest(String script) {
    return scripting.digest(script);
  }

  @Override
  public void close() {
    connection.close();
  }
}
