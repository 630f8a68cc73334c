package dev.idempotency.redis;

import io.lettuce.core.RedisNoScriptException;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The store's Lua scripts, read from the jar (shared functions first), and how they are run: by
 * SHA, and in full when the server answers {@code NOSCRIPT}, as a restarted or failed-over one
 * does.
 */
final class Scripts {

  private static final Logger log = LoggerFactory.getLogger(RedisKeyStore.class);

  /** {@code perKey}: one key's part of a script, a value it cannot read that key's answer alone. */
  private static final String UNREADABLE = "unreadable-function.lua";

  /** A script with its SHA-1. */
  record Script(String name, String source, String sha) {}

  final Script claim;
  final Script claimBatch;
  final Script complete;
  final Script completeBatch;
  final Script release;
  final Script takeBack;
  final Script extend;
  final Script extendBatch;
  final Script inspect;
  final Script forget;
  private final StoreCommands commands;

  Scripts(StoreCommands commands) {
    this.commands = commands;
    this.claim = load("claim", UNREADABLE, "record-functions.lua", "claim.lua");
    this.claimBatch = load("claim a batch", UNREADABLE, "record-functions.lua", "claim-batch.lua");
    this.complete = load("complete", UNREADABLE, "complete-function.lua", "complete.lua");
    this.completeBatch =
        load("complete a batch", UNREADABLE, "complete-function.lua", "complete-batch.lua");
    this.release = load("release", UNREADABLE, "record-functions.lua", "release.lua");
    this.takeBack = load("take back", UNREADABLE, "record-functions.lua", "take-back.lua");
    this.extend = load("extend", UNREADABLE, "record-functions.lua", "extend.lua");
    this.extendBatch =
        load("extend a batch", UNREADABLE, "record-functions.lua", "extend-batch.lua");
    this.inspect = load("inspect", "record-functions.lua", "inspect.lua");
    this.forget = load("forget", "forget.lua");
  }

  /** Runs a script within an operation: {@code EVALSHA}, then {@code EVAL} on {@code NOSCRIPT}. */
  CompletableFuture<List<Object>> run(
      Operation operation, Script script, String[] keys, byte[]... args) {
    return operation
        .send(() -> commands.evalsha(script.sha(), keys, args))
        .exceptionallyCompose(
            error -> {
              if (Operation.unwrap(error) instanceof RedisNoScriptException) {
                log.debug("Redis did not know the {} script (restart or failover)", script.name());
                return operation.send(() -> commands.eval(script.source(), keys, args));
              }
              return CompletableFuture.failedFuture(Operation.unwrap(error));
            });
  }

  private Script load(String name, String... resources) {
    StringBuilder source = new StringBuilder();
    for (String resource : resources) {
      try (InputStream in = Scripts.class.getResourceAsStream(resource)) {
        if (in == null) {
          throw new IllegalStateException("missing script " + resource);
        }
        source.append(new String(in.readAllBytes(), StandardCharsets.UTF_8)).append('\n');
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
    String text = source.toString();
    return new Script(name, text, sha1(text));
  }

  /** The SHA-1 Redis gives a script, in lower-case hex, computed here: no connection needed. */
  static String sha1(String script) {
    try {
      byte[] digest =
          java.security.MessageDigest.getInstance("SHA-1")
              .digest(script.getBytes(StandardCharsets.UTF_8));
      return java.util.HexFormat.of().formatHex(digest);
    } catch (java.security.NoSuchAlgorithmException e) {
      throw new IllegalStateException("every Java runtime has SHA-1", e);
    }
  }
}
