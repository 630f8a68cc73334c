package dev.idempotency.reliability;

import dev.idempotency.testservers.FreePorts;
import dev.idempotency.testservers.RedisBinary;
import dev.idempotency.testservers.Signals;
import java.lang.reflect.Field;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import redis.embedded.RedisServer;

/**
 * A real redis-server that a test can kill with SIGKILL and start again on the same port and data
 * directory, with or without the append-only file.
 */
final class RestartableRedis implements AutoCloseable {

  final int port = FreePorts.next();
  private final Path dir;
  private final boolean appendOnly;
  private RedisServer server;

  RestartableRedis(boolean appendOnly) throws Exception {
    this.appendOnly = appendOnly;
    this.dir = Files.createTempDirectory("idem-redis-" + port);
    start();
  }

  String uri() {
    return "redis://127.0.0.1:" + port;
  }

  void start() {
    server =
        RedisServer.builder()
            .redisExecProvider(RedisBinary.provider())
            .port(port)
            .setting("bind 127.0.0.1")
            .setting("dir " + dir)
            .setting("save \"\"")
            .setting("appendonly " + (appendOnly ? "yes" : "no"))
            .setting("appendfsync always")
            .build();
    RedisBinary.start(server);
  }

  /** Kills the server process with SIGKILL: no shutdown, no final write. */
  void kill() throws Exception {
    Process process = process();
    process.destroyForcibly();
    if (!process.waitFor(30, TimeUnit.SECONDS)) {
      throw new IllegalStateException("redis-server did not die");
    }
    try {
      server.stop();
    } catch (RuntimeException alreadyDead) {
      // the embedded wrapper may complain that its process is gone
    }
  }

  /** Stops the server process with SIGSTOP: it holds its connections and answers nothing. */
  void pause() throws Exception {
    Signals.stop(process().pid());
  }

  /** Lets a {@link #pause() paused} server go on (SIGCONT): it answers what it was sent. */
  void resume() throws Exception {
    Signals.resume(process().pid());
  }

  private Process process() throws Exception {
    Field field = server.getClass().getSuperclass().getDeclaredField("redisProcess");
    field.setAccessible(true);
    return (Process) field.get(server);
  }

  @Override
  public void close() throws Exception {
    try {
      server.stop();
    } catch (RuntimeException ignored) {
      // stopped already
    }
    TempDirs.delete(dir);
  }
}
