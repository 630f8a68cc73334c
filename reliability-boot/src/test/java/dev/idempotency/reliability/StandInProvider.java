package dev.idempotency.reliability;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import dev.idempotency.reliability.FaultHistory.Send;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URLDecoder;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.HashMap;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The provider every send of the end-to-end run goes to: an HTTP server in the test's JVM that
 * accepts {@code POST /send}, writes the send to {@code sends-provider.log} (synced, in {@link
 * FaultHistory}'s format) the moment it arrives, and answers with a new message id after a delay
 * drawn from {@code [minDelayMillis, maxDelayMillis]}: a slow provider, so that sends are in flight
 * when the nemesis strikes. A send the application was killed during still counts: the message went
 * out.
 */
final class StandInProvider implements AutoCloseable {

  private final HttpServer server;
  private final ExecutorService threads = Executors.newFixedThreadPool(32);
  private final FileChannel log;
  private final AtomicLong ids = new AtomicLong();
  private final AtomicInteger inFlight = new AtomicInteger();
  private final Random delays;
  private final int minDelayMillis;
  private final int maxDelayMillis;

  StandInProvider(Path dir, long seed, int minDelayMillis, int maxDelayMillis) throws IOException {
    this.delays = new Random(seed);
    this.minDelayMillis = minDelayMillis;
    this.maxDelayMillis = maxDelayMillis;
    this.log =
        FileChannel.open(
            dir.resolve("sends-provider.log"),
            StandardOpenOption.CREATE,
            StandardOpenOption.WRITE,
            StandardOpenOption.APPEND);
    server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 64);
    server.createContext("/send", this::handle);
    server.setExecutor(threads);
    server.start();
  }

  String url() {
    return "http://127.0.0.1:" + server.getAddress().getPort() + "/send";
  }

  /** How many sends it accepted. */
  long sends() {
    return ids.get();
  }

  /** How many sends it accepted and has not answered yet. */
  int inFlight() {
    return inFlight.get();
  }

  private void handle(HttpExchange exchange) throws IOException {
    inFlight.incrementAndGet();
    try (exchange) {
      Map<String, String> form =
          form(new String(exchange.getRequestBody().readAllBytes(), StandardCharsets.UTF_8));
      String id = "msg-" + ids.incrementAndGet();
      long now = System.currentTimeMillis();
      Send send =
          new Send(
              form.get("key"),
              form.get("providerKey"),
              Integer.parseInt(form.get("attempt")),
              Integer.parseInt(form.get("instance")),
              Long.parseLong(form.get("start")),
              now,
              id);
      record(send.line());
      // the provider's own latency, simulated: the request stays open this long
      TimeUnit.MILLISECONDS.sleep(delay());
      byte[] body = id.getBytes(StandardCharsets.UTF_8);
      exchange.sendResponseHeaders(200, body.length);
      try (OutputStream out = exchange.getResponseBody()) {
        out.write(body);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } finally {
      inFlight.decrementAndGet();
    }
  }

  private synchronized long delay() {
    return minDelayMillis + delays.nextInt(maxDelayMillis - minDelayMillis + 1);
  }

  private synchronized void record(String line) throws IOException {
    ByteBuffer bytes = ByteBuffer.wrap((line + "\n").getBytes(StandardCharsets.UTF_8));
    while (bytes.hasRemaining()) {
      log.write(bytes);
    }
    log.force(false);
  }

  private static Map<String, String> form(String body) {
    Map<String, String> fields = new HashMap<>();
    for (String pair : body.split("&")) {
      int eq = pair.indexOf('=');
      fields.put(
          URLDecoder.decode(pair.substring(0, eq), StandardCharsets.UTF_8),
          URLDecoder.decode(pair.substring(eq + 1), StandardCharsets.UTF_8));
    }
    return fields;
  }

  @Override
  public void close() throws IOException {
    server.stop(0);
    threads.shutdownNow();
    log.close();
  }
}
