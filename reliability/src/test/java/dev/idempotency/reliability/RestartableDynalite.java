package dev.idempotency.reliability;

import dev.idempotency.testservers.Dynalite;
import dev.idempotency.testservers.FreePorts;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * A real dynalite (DynamoDB's API on LevelDB) that keeps its data on disk, so that a test can kill
 * it with {@code SIGKILL} and start it again on the same port and data.
 */
final class RestartableDynalite implements AutoCloseable {

  final int port = FreePorts.next();
  private final Path dataDir;
  private Dynalite server;

  RestartableDynalite() throws Exception {
    dataDir = Files.createTempDirectory("idem-dynalite-" + port);
    start();
  }

  /** The spec for {@link Stores#open}. */
  String spec() {
    return DynamoDbStores.spec(port);
  }

  void start() throws Exception {
    server = new Dynalite(port, dataDir);
  }

  /** Kills the server with {@code SIGKILL}: no shutdown; its data stays as the kill left it. */
  void kill() throws Exception {
    server.kill();
    server.close();
  }

  @Override
  public void close() throws Exception {
    server.close();
    TempDirs.delete(dataDir);
  }
}
