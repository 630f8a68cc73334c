package dev.idempotency.redis;

import io.lettuce.core.api.sync.RedisServerCommands;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Reads per-command call counts from {@code INFO commandstats}. Redis counts the commands a Lua
 * script runs too; those are not round trips, so {@link #roundTrips} counts only what a client
 * sent.
 */
final class CommandStats {
  private static final Pattern CALLS = Pattern.compile("cmdstat_([\\w|]+):calls=(\\d+)");

  /** Commands that the store's scripts run inside Redis. */
  private static final Set<String> INSIDE_SCRIPTS =
      Set.of("time", "hmget", "hset", "del", "pexpireat");

  /** Commands the test itself or the client library send, not the store. */
  private static final Set<String> NOT_THE_STORE =
      Set.of("info", "config", "cluster", "command", "ping", "hello", "client|setinfo", "client");

  private CommandStats() {}

  static Map<String, Long> snapshot(RedisServerCommands<String, String> server) {
    Map<String, Long> calls = new TreeMap<>();
    Matcher m = CALLS.matcher(server.info("commandstats"));
    while (m.find()) {
      calls.put(m.group(1), Long.parseLong(m.group(2)));
    }
    return calls;
  }

  /** Commands sent by clients between two snapshots, excluding the test's own. */
  static long roundTrips(Map<String, Long> before, Map<String, Long> after) {
    long total = 0;
    for (Map.Entry<String, Long> entry : after.entrySet()) {
      String command = entry.getKey();
      if (INSIDE_SCRIPTS.contains(command) || NOT_THE_STORE.contains(command)) {
        continue;
      }
      total += entry.getValue() - before.getOrDefault(command, 0L);
    }
    return total;
  }

  /** Calls of one command, such as {@code eval}. */
  static long calls(RedisServerCommands<String, String> server, String command) {
    return snapshot(server).getOrDefault(command, 0L);
  }
}
