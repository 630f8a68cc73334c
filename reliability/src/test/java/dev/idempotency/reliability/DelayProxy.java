package dev.idempotency.reliability;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * A TCP proxy on loopback between a client and a store, with plain sockets, that can pass traffic,
 * delay every chunk, drop everything (a black hole: connections stay open, nothing arrives), or
 * drop only the store's replies (its requests arrive and are run, their answers are lost).
 */
final class DelayProxy implements AutoCloseable {

  enum Mode {
    PASS,
    DELAY,
    DROP,
    DROP_REPLIES
  }

  private final ServerSocket listener;
  private final int targetPort;
  private final ExecutorService threads = Executors.newCachedThreadPool();
  private final List<Socket> sockets = new CopyOnWriteArrayList<>();
  private volatile Mode mode = Mode.PASS;
  private volatile long delayMillis;

  DelayProxy(int targetPort) throws IOException {
    this.targetPort = targetPort;
    this.listener = new ServerSocket();
    listener.bind(new InetSocketAddress("127.0.0.1", 0));
    threads.submit(this::accept);
  }

  int port() {
    return listener.getLocalPort();
  }

  void pass() {
    mode = Mode.PASS;
  }

  void delay(long millis) {
    delayMillis = millis;
    mode = Mode.DELAY;
  }

  void drop() {
    mode = Mode.DROP;
  }

  /** The store still gets and runs what clients send; its replies are lost. */
  void dropReplies() {
    mode = Mode.DROP_REPLIES;
  }

  /** Breaks every connection through the proxy, as a cut network eventually does; new ones work. */
  void reset() {
    List<Socket> open = List.copyOf(sockets);
    sockets.removeAll(open);
    open.forEach(DelayProxy::closeQuietly);
  }

  private void accept() {
    while (!listener.isClosed()) {
      Socket client;
      try {
        client = listener.accept();
      } catch (IOException e) {
        return; // the proxy was closed
      }
      try {
        Socket server = new Socket("127.0.0.1", targetPort);
        // each chunk goes on at once, as it came: with Nagle's algorithm a request written in two
        // parts (HTTP's headers, then its body) waits for the delayed ACK of the first, 40 ms
        client.setTcpNoDelay(true);
        server.setTcpNoDelay(true);
        sockets.add(client);
        sockets.add(server);
        threads.submit(() -> pump(client, server, false));
        threads.submit(() -> pump(server, client, true));
      } catch (IOException e) {
        // the store is down (restarting): refuse this client as the store would, keep listening
        closeQuietly(client);
      }
    }
  }

  private void pump(Socket from, Socket to, boolean replies) {
    byte[] buffer = new byte[16 * 1024];
    try (InputStream in = from.getInputStream();
        OutputStream out = to.getOutputStream()) {
      int read;
      while ((read = in.read(buffer)) >= 0) {
        Mode now = mode;
        if (now == Mode.DROP || (now == Mode.DROP_REPLIES && replies)) {
          continue;
        }
        if (now == Mode.DELAY) {
          Thread.sleep(delayMillis);
        }
        out.write(buffer, 0, read);
        out.flush();
      }
    } catch (IOException | InterruptedException e) {
      // the connection ended
    } finally {
      closeQuietly(from);
      closeQuietly(to);
    }
  }

  private static void closeQuietly(Socket socket) {
    try {
      socket.close();
    } catch (IOException ignored) {
      // closing
    }
  }

  @Override
  public void close() throws IOException {
    listener.close();
    sockets.forEach(DelayProxy::closeQuietly);
    threads.shutdownNow();
  }
}
