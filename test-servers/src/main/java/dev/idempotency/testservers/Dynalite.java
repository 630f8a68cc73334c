package dev.idempotency.testservers;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URI;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * A real DynamoDB API for the tests: the npm package {@code dynalite} (a DynamoDB implementation on
 * LevelDB, in Node.js), started on a free port on 127.0.0.1, in memory, and stopped by its own
 * process id (and when the JVM exits). It needs {@code node} and {@code npm} on the {@code PATH};
 * the package itself is installed with npm on first use into a cache directory ({@code
 * $DYNALITE_HOME}, else {@code ~/.cache/idempotency/dynalite-4.0.0}), which {@code .ci/run} fills
 * beforehand. About 1 s to start on a 2-core machine; the tests of a JVM share one through {@link
 * #shared()}.
 *
 * <p>What dynalite does not emulate (seen with 4.0.0): {@code ReturnValuesOnConditionCheckFailure}
 * is accepted but returns no item, transactions and {@code UpdateTimeToLive} answer {@code
 * UnknownOperationException}, expired items are never deleted, and nothing is ever throttled. It
 * also exits on a request its client aborts mid-body; the server started here drops that request
 * instead and goes on, as DynamoDB does.
 */
public final class Dynalite implements AutoCloseable {

  /** The version of dynalite installed and started. */
  public static final String VERSION = "4.0.0";

  private static final long START_TIMEOUT_SECONDS = 120;

  /**
   * dynalite 4.0.0 throws the error of a request whose client went away mid-body ({@code req.on(
   * 'error', err => { throw err })}), which ends the whole server: a client whose attempt timed out
   * on a loaded machine, or a process killed mid-request, took every later test's server with it.
   * Real DynamoDB drops such a request and serves the others; so does this, preloaded into node.
   */
  private static final String SURVIVE_ABORTED_REQUESTS =
      "process.on('uncaughtException', function (err) {\n"
          + "  if (err && err.code === 'ECONNRESET') {\n"
          + "    console.error('dynalite: dropped a request its client aborted: ' + err.message)\n"
          + "    return\n"
          + "  }\n"
          + "  console.error((err && err.stack) || err)\n"
          + "  process.exit(1)\n"
          + "})\n";

  private static final long INSTALL_TIMEOUT_SECONDS = 600;

  private static Dynalite shared;

  private final Path dir;
  private final int port;
  private final Process process;
  private final long startMillis;

  /**
   * Starts dynalite in memory on a free port.
   *
   * @throws IOException if it cannot be installed or started
   * @throws InterruptedException if interrupted while waiting for it
   */
  public Dynalite() throws IOException, InterruptedException {
    this(FreePorts.next());
  }

  /**
   * Starts dynalite in memory on the given port (a test that restarts it uses the same port).
   *
   * @param port the port on 127.0.0.1
   * @throws IOException if it cannot be installed or started
   * @throws InterruptedException if interrupted while waiting for it
   */
  public Dynalite(int port) throws IOException, InterruptedException {
    this(port, null);
  }

  /**
   * Starts dynalite on the given port, keeping its tables and items in {@code dataDirectory}
   * (LevelDB, {@code --path}) when that is not null: a server killed and started again on the same
   * directory has them still. The caller owns the directory; {@link #close()} leaves it.
   *
   * @param port the port on 127.0.0.1
   * @param dataDirectory where the data lives, or null for memory only
   * @throws IOException if it cannot be installed or started
   * @throws InterruptedException if interrupted while waiting for it
   */
  public Dynalite(int port, Path dataDirectory) throws IOException, InterruptedException {
    long started = System.nanoTime();
    Path executable = installed();
    this.port = port;
    this.dir = Files.createTempDirectory("idem-dynalite");
    Path survivesAborts = dir.resolve("survive-aborted-requests.js");
    Files.writeString(survivesAborts, SURVIVE_ABORTED_REQUESTS, StandardCharsets.UTF_8);
    // node runs dynalite's own script (the one behind the executable) with the guard preloaded
    Path script = executable.toRealPath();
    List<String> command =
        new ArrayList<>(
            List.of(
                "node",
                "--require",
                survivesAborts.toString(),
                script.toString(),
                "--host",
                "127.0.0.1",
                "--port",
                Integer.toString(port)));
    if (dataDirectory != null) {
      Files.createDirectories(dataDirectory);
      command.addAll(List.of("--path", dataDirectory.toString()));
    }
    ProcessBuilder builder =
        new ProcessBuilder(command)
            .redirectErrorStream(true)
            .redirectOutput(dir.resolve("dynalite.out").toFile());
    process = builder.start();
    try {
      awaitStartup();
    } catch (IOException | InterruptedException | RuntimeException e) {
      close();
      throw e;
    }
    startMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);
  }

  /**
   * Where dynalite is installed: {@code $DYNALITE_HOME} or {@code ~/.cache/idempotency/dynalite-}
   * {@value #VERSION}.
   *
   * @return the installation directory (holding {@code node_modules})
   */
  public static Path home() {
    String configured = System.getenv("DYNALITE_HOME");
    if (configured != null && !configured.isBlank()) {
      return Path.of(configured);
    }
    return Path.of(System.getProperty("user.home"), ".cache", "idempotency", "dynalite-" + VERSION);
  }

  /**
   * Installs dynalite with npm into {@link #home()} unless it is there already; safe when several
   * JVMs start at once (a file lock, and an install into a temporary directory moved into place).
   *
   * @return the {@code dynalite} executable
   * @throws IOException if npm is missing or fails
   * @throws InterruptedException if interrupted while npm runs
   */
  public static synchronized Path installed() throws IOException, InterruptedException {
    Path home = home();
    Path executable = home.resolve("node_modules").resolve(".bin").resolve("dynalite");
    if (Files.isExecutable(executable)) {
      return executable;
    }
    Files.createDirectories(home.getParent());
    Path lockFile = home.getParent().resolve(home.getFileName() + ".lock");
    try (FileChannel channel =
            FileChannel.open(lockFile, StandardOpenOption.CREATE, StandardOpenOption.WRITE);
        FileLock lock = channel.lock()) {
      if (Files.isExecutable(executable)) {
        return executable;
      }
      Path staging = Files.createTempDirectory(home.getParent(), "dynalite-install");
      ProcessBuilder npm =
          new ProcessBuilder(
                  List.of(
                      "npm",
                      "install",
                      "--no-audit",
                      "--no-fund",
                      "--prefix",
                      staging.toString(),
                      "dynalite@" + VERSION))
              .redirectErrorStream(true)
              .redirectOutput(staging.resolve("npm.out").toFile());
      Process install;
      try {
        install = npm.start();
      } catch (IOException e) {
        throw new IllegalStateException(
            "npm is missing: install Node.js and npm (apt-get install nodejs npm), as .ci/run does,"
                + " or install dynalite "
                + VERSION
                + " into "
                + home,
            e);
      }
      if (!install.waitFor(INSTALL_TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
        install.destroyForcibly();
        throw new IllegalStateException(
            "npm install dynalite did not finish in " + INSTALL_TIMEOUT_SECONDS + " s");
      }
      if (install.exitValue() != 0) {
        throw new IllegalStateException(
            "npm install dynalite failed with "
                + install.exitValue()
                + ": "
                + tail(staging.resolve("npm.out")));
      }
      deleteTree(home);
      Files.move(staging, home, StandardCopyOption.ATOMIC_MOVE);
    }
    return executable;
  }

  private void awaitStartup() throws IOException, InterruptedException {
    Path out = dir.resolve("dynalite.out");
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(START_TIMEOUT_SECONDS);
    while (true) {
      if (!process.isAlive()) {
        throw new IllegalStateException(
            "dynalite exited with " + process.exitValue() + ": " + tail(out));
      }
      if (Files.readString(out, StandardCharsets.UTF_8).contains("listening at") && accepts()) {
        return;
      }
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException(
            "dynalite did not start in " + START_TIMEOUT_SECONDS + " s: " + tail(out));
      }
      Thread.sleep(50);
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
   * The dynalite the tests of this JVM share, started on first use and stopped when the JVM exits.
   *
   * @return the server
   */
  public static synchronized Dynalite shared() {
    if (shared == null) {
      try {
        shared = new Dynalite();
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException("interrupted while starting dynalite", e);
      }
      Dynalite started = shared;
      Runtime.getRuntime().addShutdownHook(new Thread(started::close));
    }
    return shared;
  }

  /**
   * The port on 127.0.0.1.
   *
   * @return the port
   */
  public int port() {
    return port;
  }

  /**
   * The endpoint to give the AWS SDK's {@code endpointOverride}.
   *
   * @return {@code http://127.0.0.1:<port>}
   */
  public URI endpoint() {
    return URI.create("http://127.0.0.1:" + port);
  }

  /**
   * How long the server took to start (and, the first time, to install), in milliseconds.
   *
   * @return milliseconds
   */
  public long startMillis() {
    return startMillis;
  }

  /**
   * Whether the server process is still running.
   *
   * @return {@code true} while it runs
   */
  public boolean isAlive() {
    return process.isAlive();
  }

  /**
   * Kills the server with {@code SIGKILL}, as a crash: no shutdown. Its data directory, if it has
   * one, stays as the kill left it.
   *
   * @throws InterruptedException if interrupted while waiting for it to die
   */
  public void kill() throws InterruptedException {
    process.destroyForcibly();
    if (!process.waitFor(30, TimeUnit.SECONDS)) {
      throw new IllegalStateException("dynalite (pid " + process.pid() + ") did not die");
    }
  }

  /**
   * Stops the server process with SIGSTOP, as a stall would: it holds its connections and answers
   * nothing until {@link #resume()}.
   */
  public void pause() throws InterruptedException {
    Signals.stop(process.pid());
  }

  /** Lets a {@link #pause() paused} server go on (SIGCONT): it answers what it was sent. */
  public void resume() throws InterruptedException {
    Signals.resume(process.pid());
  }

  /** Stops the server by its process id and deletes its temporary directory. */
  @Override
  public void close() {
    process.destroy();
    try {
      if (!process.waitFor(30, TimeUnit.SECONDS)) {
        process.destroyForcibly();
        process.waitFor(10, TimeUnit.SECONDS);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      process.destroyForcibly();
    }
    try {
      deleteTree(dir);
    } catch (IOException e) {
      // a temporary directory; the next run does not need it
    }
  }

  private static void deleteTree(Path root) throws IOException {
    if (!Files.exists(root)) {
      return;
    }
    try (Stream<Path> files = Files.walk(root)) {
      files.sorted(Comparator.reverseOrder()).forEach(path -> path.toFile().delete());
    }
  }
}
