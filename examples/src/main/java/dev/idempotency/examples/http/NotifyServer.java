package dev.idempotency.examples.http;

import com.sun.net.httpserver.HttpServer;
import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.examples.providers.FakeEmailProvider;
import dev.idempotency.examples.providers.FakePushProvider;
import dev.idempotency.examples.providers.FakeSmsProvider;
import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.jdbc.JdbcKeyStore;
import dev.idempotency.redis.RedisKeyStore;
import dev.idempotency.spi.KeyStore;
import io.lettuce.core.RedisClient;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * The notify service on the JDK's built-in HTTP server.
 *
 * <p>Run it with {@code mvn -q -pl examples -am compile exec:java
 * -Ddemo.main=dev.idempotency.examples.http.NotifyServer -Dexec.args="--port 8080 --store memory"}.
 * The store is {@code memory} (the default), a JDBC URL ({@code jdbc:postgresql://...}) or a Redis
 * URI ({@code redis://localhost:6379}).
 */
public final class NotifyServer implements AutoCloseable {

  /** The fake SMS provider behind {@code channel: sms}. */
  public final FakeSmsProvider sms = new FakeSmsProvider();

  /** The fake email provider behind {@code channel: email}. */
  public final FakeEmailProvider email = new FakeEmailProvider();

  /** The fake push provider behind {@code channel: push}. */
  public final FakePushProvider push = new FakePushProvider();

  private final HttpServer server;
  private final ExecutorService executor = Executors.newFixedThreadPool(32);

  /**
   * Starts the server.
   *
   * @param port the port, 0 for any free one
   * @param store the idempotency store
   * @param inFlightWait how long a repeat waits for an in-flight first request before 409
   * @throws IOException if the port cannot be bound
   */
  public NotifyServer(int port, KeyStore store, Duration inFlightWait) throws IOException {
    IdempotencyGuard guard =
        IdempotencyGuard.builder()
            .store(store)
            .lease(Duration.ofSeconds(30))
            .inFlightWait(inFlightWait)
            .build();
    server = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 0);
    server.createContext("/notify", new NotifyHandler(guard, sms, email, push));
    server.setExecutor(executor);
    server.start();
  }

  /**
   * The port the server listens on.
   *
   * @return the port
   */
  public int port() {
    return server.getAddress().getPort();
  }

  @Override
  public void close() {
    server.stop(0);
    executor.shutdownNow();
  }

  /**
   * Opens a store from a command-line specification.
   *
   * @param spec {@code memory}, a JDBC URL or a Redis URI
   * @return the store
   */
  public static KeyStore openStore(String spec) {
    if (spec.equals("memory")) {
      return InMemoryKeyStore.builder().build();
    }
    if (spec.startsWith("jdbc:")) {
      // A pool that gives up on a connection after 2 s, so that a stopped database is a 503
      // within seconds, not after the pool's default 30 s; the store bounds each operation (5 s).
      HikariConfig pool = new HikariConfig();
      pool.setJdbcUrl(spec);
      pool.setMaximumPoolSize(16);
      pool.setConnectionTimeout(2_000);
      return JdbcKeyStore.builder(new HikariDataSource(pool))
          .createSchemaIfMissing(true)
          .databaseTime(true)
          .build();
    }
    if (spec.startsWith("redis://") || spec.startsWith("rediss://")) {
      // The store bounds each operation (2 s by default), whatever the client's 60 s timeout.
      return RedisKeyStore.builder(RedisClient.create(spec)).build();
    }
    throw new IllegalArgumentException("--store must be memory, a jdbc: URL or a redis:// URI");
  }

  /**
   * Runs the server until the process is stopped.
   *
   * @param args {@code --port N}, {@code --store SPEC} and {@code --sms-delay-ms N} (a slow SMS
   *     provider, to see a 409)
   * @throws IOException if the port cannot be bound
   */
  public static void main(String[] args) throws IOException {
    int port = 8080;
    String store = "memory";
    long smsDelayMillis = 0;
    for (int i = 0; i + 1 < args.length; i += 2) {
      switch (args[i]) {
        case "--port" -> port = Integer.parseInt(args[i + 1]);
        case "--store" -> store = args[i + 1];
        case "--sms-delay-ms" -> smsDelayMillis = Long.parseLong(args[i + 1]);
        default -> throw new IllegalArgumentException("unknown option " + args[i]);
      }
    }
    NotifyServer server = new NotifyServer(port, openStore(store), Duration.ofSeconds(2));
    server.sms.delay(Duration.ofMillis(smsDelayMillis));
    System.out.println(
        "POST http://localhost:"
            + server.port()
            + "/notify  (store: "
            + store.replaceAll("//[^@/]*@", "//***@")
            + ")");
  }
}
