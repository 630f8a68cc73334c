package dev.idempotency.redis;

import io.lettuce.core.api.sync.RedisServerCommands;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Reads per-command call counts from {@code INFO commandstats}. Redis counts the commands a Lua
 * script runs there too: to count round trips, use {@link ClientCommands}.
 */
final class CommandStats {
  private static final Pattern CALLS = Pattern.compile("cmdstat_([\\w|]+):calls=(\\d+)");

  private CommandStats() {}

  static Map<String, Long> snapshot(RedisServerCommands<String, String> server) {
    Map<String, Long> calls = new TreeMap<>();
    Matcher m = CALLS.matcher(server.info("commandstats"));
    while (m.find()) {
      calls.put(m.group(1), Long.parseLong(m.group(2)));
    }
    return calls;
  }

  /** Calls of one command, such as {@code eval}. */
  static long calls(RedisServerCommands<String, String> server, String command) {
    return snapshot(server).getOrDefault(command, 0L);
  }
}
