package dev.idempotency.reliability;

import dev.idempotency.testservers.FreePorts;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;

/** A real PostgreSQL that a test can stop and start again on the same port and data directory. */
final class RestartablePostgres implements AutoCloseable {

  final int port = FreePorts.next();
  private final Path parent;
  private final Path dataDir;
  private EmbeddedPostgres postgres;

  RestartablePostgres() throws Exception {
    parent = Files.createTempDirectory("idem-pg-" + port);
    dataDir = parent.resolve("data");
    start();
  }

  String url() {
    return "jdbc:postgresql://127.0.0.1:" + port + "/postgres?user=postgres";
  }

  /** Never "clean": a clean data directory is deleted on close, and the restart needs it. */
  private void start() throws Exception {
    postgres =
        EmbeddedPostgres.builder()
            .setPort(port)
            .setDataDirectory(dataDir)
            .setCleanDataDirectory(false)
            .setPGStartupWait(Duration.ofSeconds(120))
            .start();
  }

  void stop() throws Exception {
    postgres.close();
  }

  void restart() throws Exception {
    start();
  }

  @Override
  public void close() throws Exception {
    postgres.close();
    TempDirs.delete(parent);
  }
}
