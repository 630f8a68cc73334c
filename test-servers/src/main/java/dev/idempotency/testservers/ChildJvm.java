package dev.idempotency.testservers;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * A second JVM for a test that races two processes on one store: a main class of the test's, run on
 * the test's own class path, the two JVMs started together. The child prints {@code READY} once it
 * is set up and waits for a line on its stdin ({@link #readyThenAwaitGo}); the parent, once set up
 * itself, waits for that and answers {@code GO} ({@link #go}). The child ends by printing what it
 * counted on one line ({@link #exitWithCounts}); its stderr goes to a file, whose tail {@link
 * #stderr} gives for failure messages.
 *
 * <pre>{@code
 * ChildJvm child = ChildJvm.start(MyProbeTest.class, url, prefix);
 * Map<String, Integer> parent = run(url, prefix, child::go);
 * assertThat(child.waitFor(Duration.ofSeconds(180))).as("ended; %s", child.stderr()).isTrue();
 * String childSummary = child.output();
 * }</pre>
 *
 * <p>Not thread-safe; one per child process.
 */
public final class ChildJvm {

  private final Process process;
  private final BufferedReader out;
  private final Path stderr;

  private ChildJvm(Process process, Path stderr) {
    this.process = process;
    this.out =
        new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
    this.stderr = stderr;
  }

  /** Starts {@code main}'s {@code main(args)} in a new JVM of this one's Java and class path. */
  public static ChildJvm start(Class<?> main, String... args) throws IOException {
    Path dir = Files.createTempDirectory("child-jvm");
    Path stderr = dir.resolve("child-stderr.txt");
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    String[] command = new String[4 + args.length];
    command[0] = java;
    command[1] = "-cp";
    command[2] = System.getProperty("java.class.path");
    command[3] = main.getName();
    System.arraycopy(args, 0, command, 4, args.length);
    Process process = new ProcessBuilder(command).redirectError(stderr.toFile()).start();
    return new ChildJvm(process, stderr);
  }

  /** In the parent: waits for the child's {@code READY}, then tells it to go. */
  public void go() {
    try {
      String ready = out.readLine();
      if (!"READY".equals(ready)) {
        throw new IllegalStateException("the child said " + ready + "; stderr: " + stderr());
      }
      process.getOutputStream().write("GO\n".getBytes(StandardCharsets.UTF_8));
      process.getOutputStream().flush();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Waits for the child to end, {@code timeout} at most: whether it ended. */
  public boolean waitFor(Duration timeout) throws InterruptedException {
    return process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS);
  }

  /** What the child printed after {@code READY}, its lines joined; once it ended. */
  public String output() {
    return String.join("\n", out.lines().toList());
  }

  /** The child's exit value; once it ended. */
  public int exitValue() {
    return process.exitValue();
  }

  /** The last 4,000 characters of the child's stderr. */
  public String stderr() {
    try {
      String text = Files.readString(stderr);
      return text.length() > 4000 ? text.substring(text.length() - 4000) : text;
    } catch (Exception e) {
      return "(none: " + e + ")";
    }
  }

  /** In the child: says {@code READY} and waits for the parent's line. */
  public static void readyThenAwaitGo() {
    System.out.println("READY");
    System.out.flush();
    try {
      new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** In the child: prints {@code name=n} for each count on one line, and exits 0. */
  public static void exitWithCounts(Map<String, Integer> counts) {
    StringBuilder line = new StringBuilder();
    counts.forEach((name, n) -> line.append(name).append('=').append(n).append(' '));
    System.out.println(line.toString().trim());
    System.exit(0);
  }
}
