package dev.idempotency.testservers;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * A real RabbitMQ broker from the Debian package {@code rabbitmq-server} (which {@code .ci/run}
 * installs), started by the tests on free ports: its own Erlang port mapper ({@code epmd}) on a
 * free port, a node with a unique name, its data and logs in a temporary directory, and no
 * configuration or cookie of the machine's. Stopped by its own process ids. About 5 s to start on a
 * 2-core machine; the tests of a JVM share one through {@link #shared()}.
 */
public final class RabbitMqServer implements AutoCloseable {

  private static final Path SERVER = Path.of("/usr/lib/rabbitmq/bin/rabbitmq-server");
  private static final long START_TIMEOUT_SECONDS = 180;

  private static RabbitMqServer shared;

  private final Path dir;
  private final int port;
  private final Process epmd;
  private final Process node;
  private final String nodeName;
  private final long startMillis;

  /** Starts a broker; see the class comment. */
  public RabbitMqServer() throws IOException, InterruptedException {
    if (!Files.isExecutable(SERVER)) {
      throw new IllegalStateException(
          SERVER
              + " is missing: install the Debian package rabbitmq-server (apt-get install"
              + " rabbitmq-server), as .ci/run does");
    }
    long started = System.nanoTime();
    dir = Files.createTempDirectory("idem-rabbitmq");
    port = FreePorts.next();
    int distPort = FreePorts.next();
    int epmdPort = FreePorts.next();
    nodeName = "idem-" + UUID.randomUUID().toString().substring(0, 8) + "@localhost";
    Files.writeString(dir.resolve("rabbitmq.conf"), "loopback_users.guest = true\n");
    Files.writeString(dir.resolve("enabled_plugins"), "[].\n");

    ProcessBuilder epmdBuilder =
        new ProcessBuilder(epmd(), "-port", Integer.toString(epmdPort), "-address", "127.0.0.1")
            .redirectErrorStream(true)
            .redirectOutput(dir.resolve("epmd.out").toFile());
    epmd = epmdBuilder.start();

    ProcessBuilder builder =
        new ProcessBuilder(SERVER.toString())
            .directory(dir.toFile())
            .redirectErrorStream(true)
            .redirectOutput(dir.resolve("server.out").toFile());
    Map<String, String> env = builder.environment();
    env.put("HOME", dir.toString()); // the Erlang cookie goes here, not into the user's home
    env.put("ERL_EPMD_PORT", Integer.toString(epmdPort));
    env.put("RABBITMQ_NODENAME", nodeName);
    env.put("RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1");
    env.put("RABBITMQ_NODE_PORT", Integer.toString(port));
    env.put("RABBITMQ_DIST_PORT", Integer.toString(distPort));
    env.put("RABBITMQ_MNESIA_BASE", dir.resolve("mnesia").toString());
    env.put("RABBITMQ_LOG_BASE", dir.resolve("log").toString());
    env.put("RABBITMQ_CONFIG_FILE", dir.resolve("rabbitmq").toString());
    env.put("RABBITMQ_ENABLED_PLUGINS_FILE", dir.resolve("enabled_plugins").toString());
    env.put("RABBITMQ_CONF_ENV_FILE", dir.resolve("none.conf").toString());
    node = builder.start();
    try {
      awaitStartup();
    } catch (IOException | InterruptedException | RuntimeException e) {
      close();
      throw e;
    }
    startMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);
  }

  private static String epmd() {
    for (String candidate : new String[] {"/usr/bin/epmd", "/usr/lib/erlang/bin/epmd"}) {
      if (Files.isExecutable(Path.of(candidate))) {
        return candidate;
      }
    }
    throw new IllegalStateException("epmd is missing: install the Debian package rabbitmq-server");
  }

  private void awaitStartup() throws IOException, InterruptedException {
    Path log = dir.resolve("log").resolve(nodeName + ".log");
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(START_TIMEOUT_SECONDS);
    while (true) {
      if (!node.isAlive()) {
        throw new IllegalStateException(
            "rabbitmq-server exited with "
                + node.exitValue()
                + ": "
                + tail(dir.resolve("server.out")));
      }
      if (Files.exists(log)
          && Files.readString(log, StandardCharsets.UTF_8).contains("Server startup complete")
          && accepts()) {
        return;
      }
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException(
            "rabbitmq-server did not start in "
                + START_TIMEOUT_SECONDS
                + " s: "
                + tail(dir.resolve("server.out")));
      }
      Thread.sleep(100);
    }
  }

  private boolean accepts() {
    try (Socket socket = new Socket()) {
      socket.connect(new InetSocketAddress("127.0.0.1", port), 1_000);
      return true;
    } catch (IOException e) {
      return false;
    }
  }

  private static String tail(Path file) {
    try {
      String text = Files.exists(file) ? Files.readString(file, StandardCharsets.UTF_8) : "";
      return text.length() > 2_000 ? text.substring(text.length() - 2_000) : text;
    } catch (IOException e) {
      return "(unreadable)";
    }
  }

  /**
   * The broker the tests of this JVM share, started on first use and stopped when the JVM exits.
   *
   * @return the broker
   */
  public static synchronized RabbitMqServer shared() {
    if (shared == null) {
      try {
        shared = new RabbitMqServer();
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException("interrupted while starting RabbitMQ", e);
      }
      RabbitMqServer started = shared;
      Runtime.getRuntime().addShutdownHook(new Thread(started::close));
    }
    return shared;
  }

  /** The AMQP port on 127.0.0.1 (user and password {@code guest}). */
  public int port() {
    return port;
  }

  /** How long the broker took to start, in milliseconds. */
  public long startMillis() {
    return startMillis;
  }

  /** Stops the broker (SIGTERM to its start script, which stops the node) and its epmd. */
  @Override
  public void close() {
    stop(node);
    stop(epmd);
    try (Stream<Path> files = Files.walk(dir)) {
      files.sorted(Comparator.reverseOrder()).forEach(path -> path.toFile().delete());
    } catch (IOException e) {
      // a temporary directory; the next run does not need it
    }
  }

  private static void stop(Process process) {
    if (process == null) {
      return;
    }
    process.destroy();
    try {
      if (!process.waitFor(30, TimeUnit.SECONDS)) {
        process.descendants().forEach(ProcessHandle::destroyForcibly);
        process.destroyForcibly();
        process.waitFor(10, TimeUnit.SECONDS);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      process.descendants().forEach(ProcessHandle::destroyForcibly);
      process.destroyForcibly();
    }
  }
}
