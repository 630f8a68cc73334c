package dev.idempotency.spring.operations;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A TCP gate in front of a real database, for outage tests: it forwards connections to the
 * database, or drops them as they come (the database is gone), or accepts them and never answers (a
 * database that hangs, or a port another server took). Switching it cuts the connections open
 * through it, so that a pool's connections fail as they would when the database goes away.
 */
final class DatabaseGate implements AutoCloseable {

  /** What the gate does with a connection. */
  enum Mode {
    /** Forwards it to the database. */
    FORWARD,
    /** Closes it at once: the driver reads the end of the stream. */
    DROP,
    /** Accepts it and never answers, until the gate is switched or closed. */
    SILENT
  }

  private final ServerSocket server;
  private final int databasePort;
  private final Set<Socket> open = ConcurrentHashMap.newKeySet();
  private volatile Mode mode;

  DatabaseGate(int databasePort, Mode mode) {
    this.databasePort = databasePort;
    this.mode = mode;
    try {
      server = new ServerSocket(0, 50, InetAddress.getByName("127.0.0.1"));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    Thread acceptor = new Thread(this::accept, "database-gate-" + server.getLocalPort());
    acceptor.setDaemon(true);
    acceptor.start();
  }

  int port() {
    return server.getLocalPort();
  }

  /** Switches the gate: connections open through it are cut. */
  void switchTo(Mode next) {
    mode = next;
    for (Socket socket : open) {
      closeQuietly(socket);
    }
    open.clear();
  }

  private void accept() {
    while (!server.isClosed()) {
      Socket client;
      try {
        client = server.accept();
      } catch (IOException closed) {
        return;
      }
      Mode now = mode;
      if (now == Mode.DROP) {
        closeQuietly(client);
        continue;
      }
      open.add(client);
      if (now == Mode.SILENT) {
        continue; // held open, unanswered, until the gate is switched
      }
      try {
        Socket database = new Socket("127.0.0.1", databasePort);
        open.add(database);
        pump(client, database);
        pump(database, client);
      } catch (IOException failed) {
        closeQuietly(client);
      }
    }
  }

  private void pump(Socket from, Socket to) {
    Thread thread =
        new Thread(
            () -> {
              byte[] buffer = new byte[8192];
              try (InputStream in = from.getInputStream();
                  OutputStream out = to.getOutputStream()) {
                for (int n; (n = in.read(buffer)) >= 0; ) {
                  out.write(buffer, 0, n);
                  out.flush();
                }
              } catch (IOException ended) {
                // one side closed or was cut
              } finally {
                closeQuietly(from);
                closeQuietly(to);
                open.remove(from);
                open.remove(to);
              }
            },
            "database-gate-pump");
    thread.setDaemon(true);
    thread.start();
  }

  /** The address, as a JDBC URL of database {@code postgres}. */
  String postgresUrl() {
    return "jdbc:postgresql://127.0.0.1:" + port() + "/postgres";
  }

  @Override
  public void close() {
    closeQuietly(server);
    switchTo(Mode.DROP);
  }

  private static void closeQuietly(AutoCloseable closeable) {
    try {
      closeable.close();
    } catch (Exception ignored) {
      // already closed
    }
  }
}
