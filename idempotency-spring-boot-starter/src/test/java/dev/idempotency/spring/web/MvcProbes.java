package dev.idempotency.spring.web;

import dev.idempotency.spring.EmbeddedServers;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.IntConsumer;
import java.util.function.IntPredicate;
import java.util.function.IntSupplier;
import java.util.function.Supplier;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ApplicationListener;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.context.event.ContextClosedEvent;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.context.request.async.DeferredResult;
import org.springframework.web.context.request.async.WebAsyncTask;

/**
 * What the Spring MVC probes of an async send held past its request's end share (a client gone, a
 * container async timeout, a shutdown): an application whose endpoints of each async shape hold
 * their send ({@link HeldSends}), the wait for the handler to start, the retry repeated while the
 * key is in progress, and, for the shutdown probes, the application started on a real store that a
 * second start of it shares.
 */
final class MvcProbes {

  private MvcProbes() {}

  /** Waits (at most 20 s) until {@code runs} has moved past {@code before}: the handler started. */
  static void awaitHandlerStart(IntSupplier runs, int before) throws InterruptedException {
    long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
    while (runs.getAsInt() == before && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
  }

  /** Posts {@code {}} with {@code key} again while the answer is 409 (in progress), for 15 s. */
  static HttpResponse<byte[]> retryWhileInProgress(EndpointClient client, String path, String key)
      throws Exception {
    return retryWhile(client, path, key, status -> status == 409, Duration.ofSeconds(15));
  }

  /**
   * Posts {@code {}} with {@code key} again while the answer is 409 (in progress) or 503 (the
   * store, or the starter's hand-over, not ready yet), for 20 s.
   */
  static HttpResponse<byte[]> retryUntilAnswered(EndpointClient client, String path, String key)
      throws Exception {
    return retryWhile(
        client, path, key, status -> status == 409 || status == 503, Duration.ofSeconds(20));
  }

  private static HttpResponse<byte[]> retryWhile(
      EndpointClient client, String path, String key, IntPredicate again, Duration within)
      throws Exception {
    HttpResponse<byte[]> retry;
    long deadline = System.nanoTime() + within.toNanos();
    do {
      retry = client.post(path, key, "{}");
    } while (again.test(retry.statusCode()) && System.nanoTime() < deadline);
    return retry;
  }

  /**
   * Posts {@code {}} to {@code path} on {@code port} without waiting (60 s at most for its answer),
   * with {@code key} as its Idempotency-Key, or none if {@code key} is null.
   */
  static CompletableFuture<HttpResponse<byte[]>> sendAsync(int port, String path, String key) {
    HttpRequest.Builder request =
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
            .timeout(Duration.ofSeconds(60))
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString("{}"));
    if (key != null) {
      request.header("Idempotency-Key", key);
    }
    return EndpointClient.HTTP.sendAsync(request.build(), HttpResponse.BodyHandlers.ofByteArray());
  }

  /** Posts {@code {}} with {@code key} on another thread: the client that waits for its answer. */
  static CompletableFuture<HttpResponse<byte[]>> postAsync(
      EndpointClient client, String path, String key) {
    return CompletableFuture.supplyAsync(
        () -> {
          try {
            return client.post(path, key, "{}");
          } catch (Exception e) {
            throw new IllegalStateException(e);
          }
        });
  }

  /**
   * What the client of {@link #postAsync} got: its status and body, or "no answer" (a shutdown may
   * close the connection first).
   */
  static String answerOf(CompletableFuture<HttpResponse<byte[]>> answered) throws Exception {
    return answered
        .handle(
            (response, failure) ->
                failure != null
                    ? "no answer: " + failure
                    : response.statusCode() + " " + text(response))
        .get(60, TimeUnit.SECONDS);
  }

  /** A response as the probes' messages show it: status, replayed header, body. */
  static String replayed(HttpResponse<byte[]> response) {
    return response.statusCode()
        + " replayed="
        + EndpointClient.header(response, IdempotentEndpointInterceptor.REPLAYED_HEADER)
        + " "
        + text(response);
  }

  private static String text(HttpResponse<byte[]> response) {
    return EndpointClient.text(response);
  }

  /**
   * Starts {@code application} with graceful shutdown, a guard close grace period of 20 s and
   * {@code properties} on {@code store} ("redis": Spring Data Redis's Lettuce connection;
   * "postgres": Boot's Hikari pool); {@code closing} opens when its context begins to close.
   */
  static ConfigurableApplicationContext startOn(
      Class<?> application, String store, CountDownLatch closing, String... properties) {
    return new SpringApplicationBuilder(application)
        .listeners((ApplicationListener<ContextClosedEvent>) closed -> closing.countDown())
        .properties(
            "server.port=0",
            "server.shutdown=graceful",
            "spring.main.banner-mode=off",
            "idempotency.close-grace-period=20s")
        .properties(properties)
        .properties(storeProperties(store))
        .run();
  }

  /**
   * The retry after the application started again ({@code restart}) on the same store, repeated
   * while it is 409; {@code port} is told the new application's port first.
   */
  static HttpResponse<byte[]> replayAfterRestart(
      Supplier<ConfigurableApplicationContext> restart,
      IntConsumer port,
      EndpointClient client,
      String path,
      String key)
      throws Exception {
    try (ConfigurableApplicationContext second = restart.get()) {
      port.accept(portOf(second));
      return retryWhileInProgress(client, path, key);
    }
  }

  /** The port the application listens on. */
  static int portOf(ConfigurableApplicationContext application) {
    return application.getEnvironment().getRequiredProperty("local.server.port", Integer.class);
  }

  static String[] storeProperties(String store) {
    return store.equals("redis")
        ? new String[] {
          "idempotency.store=redis",
          "spring.data.redis.host=127.0.0.1",
          "spring.data.redis.port=" + EmbeddedServers.redisPort()
        }
        : new String[] {
          "idempotency.store=jdbc",
          "spring.datasource.url=" + EmbeddedServers.postgresUrl(),
          "idempotency.jdbc.initialize-schema=always"
        };
  }

  /** An application with the auto-configuration and {@link HeldSends}. */
  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(HeldSends.class)
  static class HeldSendApplication {}

  /**
   * An endpoint of each async shape ({@code /probe/held/{callable,future,deferred,task,task-long}})
   * whose provider send is held (at most 30 s) until the test opens {@link #gate}, then answers 201
   * with {@code "sent-<run>"}.
   */
  @RestController
  static class HeldSends {
    /** Handler runs. */
    static final AtomicInteger runs = new AtomicInteger();

    /** Sends that ended (the provider accepted the message). */
    static final AtomicInteger sent = new AtomicInteger();

    /** Holds the sends; a test sets a new one and opens it. */
    static volatile CountDownLatch gate = new CountDownLatch(1);

    private static final ExecutorService PROVIDER = Executors.newCachedThreadPool();

    static ResponseEntity<Map<String, String>> send(int run) {
      try {
        gate.await(30, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      sent.incrementAndGet();
      return ResponseEntity.status(201).body(Map.of("id", "sent-" + run));
    }

    @IdempotentEndpoint
    @PostMapping("/probe/held/callable")
    Callable<ResponseEntity<Map<String, String>>> callable() {
      int run = runs.incrementAndGet();
      return () -> send(run);
    }

    @IdempotentEndpoint
    @PostMapping("/probe/held/future")
    CompletableFuture<ResponseEntity<Map<String, String>>> future() {
      int run = runs.incrementAndGet();
      return CompletableFuture.supplyAsync(() -> send(run), PROVIDER);
    }

    @IdempotentEndpoint
    @PostMapping("/probe/held/deferred")
    DeferredResult<ResponseEntity<Map<String, String>>> deferred() {
      int run = runs.incrementAndGet();
      DeferredResult<ResponseEntity<Map<String, String>>> result = new DeferredResult<>();
      PROVIDER.execute(() -> result.setResult(send(run)));
      return result;
    }

    @IdempotentEndpoint
    @PostMapping("/probe/held/task")
    WebAsyncTask<ResponseEntity<Map<String, String>>> task() {
      int run = runs.incrementAndGet();
      return new WebAsyncTask<>(() -> send(run));
    }

    /** A task with its own timeout of 60 s: no container timeout comes while it is held. */
    @IdempotentEndpoint
    @PostMapping("/probe/held/task-long")
    WebAsyncTask<ResponseEntity<Map<String, String>>> taskLong() {
      int run = runs.incrementAndGet();
      return new WebAsyncTask<>(60_000L, () -> send(run));
    }
  }
}
