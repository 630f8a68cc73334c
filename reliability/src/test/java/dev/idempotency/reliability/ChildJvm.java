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
    List<String> command = javaCommand(256, ReliabilityChild.class);
    command.addAll(List.of(args));
    process = new ProcessBuilder(command).redirectError(stderr.toFile()).start();
    out =
        new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
  }

  /**
   * The command that starts {@code main} in a new JVM on this test's class path, with a heap of
   * {@code heapMegabytes}.
   *
   * <p>The children's JIT stops at its first tier ({@code -XX:TieredStopAtLevel=1}) and they
   * collect with the serial collector. Several children start at once on two cores, and a run of
   * tens of seconds is over before the second tier's compilations would have paid off. Measured
   * once each on the 2-vCPU box: a Redis fault run's three clients were ready in 4.3 s against 7.7
   * s, and {@code ManyProcessesTest} took 88 s against 134 s. What the children test does not
   * depend on the compiler; the library's own tests run on the default one.
   */
  static List<String> javaCommand(int heapMegabytes, Class<?> main) {
    List<String> command = new ArrayList<>();
    command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    command.add("-Xmx" + heapMegabytes + "m");
    for (String flag : System.getProperty("child.flags", FAST_START).split(" ")) {
      if (!flag.isBlank()) {
        command.add(flag);
      }
    }
    command.add("-cp");
    command.add(System.getProperty("java.class.path"));
    command.add(main.getName());
    return command;
  }

  /**
   * The children's JVM flags, unless {@code -Dchild.flags} names others (see {@link #javaCommand}).
   */
  private static final String FAST_START = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC";

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
