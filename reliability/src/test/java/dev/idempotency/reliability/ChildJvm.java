package dev.idempotency.reliability;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/** A second JVM running {@link ReliabilityChild} with this test's classpath. */
final class ChildJvm implements AutoCloseable {

  final Process process;
  private final BufferedReader out;
  private final Path stderr;

  ChildJvm(Path dir, String... args) throws IOException {
    stderr = Files.createTempFile(dir, "child", ".err");
    List<String> command = new ArrayList<>();
    command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    command.add("-Xmx256m");
    command.add("-cp");
    command.add(System.getProperty("java.class.path"));
    command.add(ReliabilityChild.class.getName());
    command.addAll(List.of(args));
    process = new ProcessBuilder(command).redirectError(stderr.toFile()).start();
    out =
        new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
  }

  /** Waits (bounded) for the child to print a line equal to {@code expected}. */
  void await(String expected, long seconds) throws Exception {
    CompletableFuture<Boolean> seen =
        CompletableFuture.supplyAsync(
            () -> {
              try {
                String line;
                while ((line = out.readLine()) != null) {
                  if (line.equals(expected)) {
                    return true;
                  }
                }
                return false;
              } catch (IOException e) {
                return false;
              }
            });
    if (!seen.get(seconds, TimeUnit.SECONDS)) {
      throw new AssertionError(
          "child ended without printing " + expected + "; stderr: " + stderr());
    }
  }

  /** Waits (bounded) for a normal exit and checks the code. */
  void awaitExit(long seconds) throws Exception {
    if (!process.waitFor(seconds, TimeUnit.SECONDS)) {
      throw new AssertionError("child did not finish in " + seconds + " s; stderr: " + stderr());
    }
    if (process.exitValue() != 0) {
      throw new AssertionError(
          "child exited with " + process.exitValue() + "; stderr: " + stderr());
    }
  }

  /** SIGKILL, as a crash. */
  void kill() throws InterruptedException {
    process.destroyForcibly();
    process.waitFor(30, TimeUnit.SECONDS);
  }

  String stderr() {
    try {
      return Files.readString(stderr);
    } catch (IOException e) {
      return "unreadable";
    }
  }

  @Override
  public void close() throws InterruptedException {
    kill();
  }
}
