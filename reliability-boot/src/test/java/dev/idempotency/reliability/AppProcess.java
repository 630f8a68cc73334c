package dev.idempotency.reliability;

import dev.idempotency.reliability.app.E2eApplication;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * One run of the Boot application ({@link E2eApplication}) in a child JVM on this module's test
 * class path ({@link ChildJvm#javaCommand}), its output in {@code app-<instance>.log}.
 */
final class AppProcess {

  final int instance;
  private final Process process;
  private final Path log;
  private final int port;

  private AppProcess(int instance, Process process, Path log, int port) {
    this.instance = instance;
    this.process = process;
    this.log = log;
    this.port = port;
  }

  /** Starts instance {@code instance} with these Spring Boot arguments. */
  static AppProcess start(Path dir, int instance, int port, List<String> args) throws IOException {
    Path log = dir.resolve("app-" + instance + ".log");
    List<String> command = new ArrayList<>(ChildJvm.javaCommand(384, E2eApplication.class));
    command.add("--server.port=" + port);
    command.add("--instance=" + instance);
    command.addAll(args);
    Process process =
        new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile()).start();
    return new AppProcess(instance, process, log, port);
  }

  /** Polls {@code GET /ready} (bounded) until it answers 200. */
  void awaitReady(HttpClient http, Duration bound) throws Exception {
    long deadline = System.nanoTime() + bound.toNanos();
    HttpRequest ready =
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/ready"))
            .timeout(Duration.ofSeconds(2))
            .build();
    while (System.nanoTime() < deadline) {
      if (!process.isAlive()) {
        throw new AssertionError(
            "application " + instance + " exited with " + process.exitValue() + ": " + tail());
      }
      try {
        if (http.send(ready, HttpResponse.BodyHandlers.discarding()).statusCode() == 200) {
          return;
        }
      } catch (IOException notYet) {
        // not listening yet
      }
      process.waitFor(100, TimeUnit.MILLISECONDS);
    }
    throw new AssertionError("application " + instance + " not ready in " + bound + ": " + tail());
  }

  /** SIGKILL: a crash, no shutdown hook runs. */
  void kill() throws InterruptedException {
    process.destroyForcibly();
    if (!process.waitFor(30, TimeUnit.SECONDS)) {
      throw new AssertionError("application " + instance + " survived SIGKILL");
    }
  }

  /**
   * SIGTERM: Spring Boot's graceful shutdown, then the guard's close(); waits (bounded) for the
   * exit.
   *
   * @return whether it exited within {@code bound} (else it was killed)
   */
  boolean terminate(Duration bound) throws InterruptedException {
    process.destroy();
    if (process.waitFor(bound.toMillis(), TimeUnit.MILLISECONDS)) {
      return true;
    }
    kill();
    return false;
  }

  boolean isAlive() {
    return process.isAlive();
  }

  /** The last lines of its log. */
  String tail() {
    try {
      List<String> lines = Files.readAllLines(log);
      return String.join("\n", lines.subList(Math.max(0, lines.size() - 40), lines.size()));
    } catch (IOException e) {
      return "(log unreadable: " + e + ")";
    }
  }
}
