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

  /** Tries at the first start: a port found free may be taken before the server binds it. */
  private static final int PORT_TRIES = 5;

  final int port;
  private final Path dir;
  private final boolean appendOnly;
  private RedisServer server;

  RestartableRedis(boolean appendOnly) throws Exception {
    this.appendOnly = appendOnly;
    int tried = 0;
    int candidate;
    Path candidateDir;
    while (true) {
      candidate = FreePorts.next();
      candidateDir = Files.createTempDirectory("idem-redis-" + candidate);
      try {
        start(candidate, candidateDir);
        break;
      } catch (RuntimeException e) {
        // another server (this module runs two test classes at once, each starting several) took
        // the port between FreePorts.next() and redis-server's bind: "Address in use"
        if (++tried >= PORT_TRIES || !portTaken(e)) {
          throw e;
        }
      }
    }
    this.port = candidate;
    this.dir = candidateDir;
  }

  private static boolean portTaken(Throwable failure) {
    for (Throwable t = failure; t != null; t = t.getCause()) {
      if (String.valueOf(t.getMessage()).contains("Address in use")) {
        return true;
      }
    }
    return false;
  }

  String uri() {
    return "redis://127.0.0.1:" + port;
  }

  void start() {
    start(port, dir);
  }

  private void start(int onPort, Path inDir) {
    server =
        RedisServer.builder()
            .redisExecProvider(RedisBinary.provider())
            .port(onPort)
            .setting("bind 127.0.0.1")
            .setting("dir " + inDir)
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
