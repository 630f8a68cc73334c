package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.EmbeddedServers;
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
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;
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
 * probeE: the application shuts down (its context closed, as on SIGTERM; Boot's graceful shutdown,
 * then the guard's close with its grace period) while an async handler's send runs whose request
 * already timed out (container async timeout 1 s: the client got 409, the request ended, so Boot's
 * graceful shutdown does not wait for it). SPEC 14, 16: calls running when close() starts finish as
 * they would have, their outcomes recorded within the grace period (here 20 s); the application
 * started again on the same store replays the send: one provider send, no lost send.
 *
 * <p>Was an open finding on Redis (Spring Data Redis): the Lettuce connection factory is a {@code
 * SmartLifecycle} that Spring stops (closing its connection) after Boot's graceful shutdown and
 * before the guard's bean was destroyed (its close() and grace period), so the outcome of a send
 * that outlived its request could not be written ("Connection is closed"); its lease lapsed and the
 * retry after the restart took the key over and sent again. Now the starter closes the guard in a
 * lifecycle phase of its own, before that factory stops. The PostgreSQL row (Hikari, closed on
 * destroy after the guard that depends on it) passed before too: the contrast.
 */
class MvcShutdownAfterTimeoutProbeTest implements EndpointClient {

  private int port;

  @Override
  public int port() {
    return port;
  }

  @Override
  public int runs() {
    return ProbeController.runs.get();
  }

  /**
   * The store's properties: Redis through Spring Data Redis's Lettuce connection, or PostgreSQL
   * (Boot's Hikari pool).
   */
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

  private static ConfigurableApplicationContext start(String store, CountDownLatch closing) {
    return new SpringApplicationBuilder(ProbeApplication.class)
        .listeners((ApplicationListener<ContextClosedEvent>) closed -> closing.countDown())
        .properties(
            "server.port=0",
            "server.shutdown=graceful",
            "spring.main.banner-mode=off",
            "idempotency.close-grace-period=20s",
            "spring.mvc.async.request-timeout=1s")
        .properties(storeProperties(store))
        .run();
  }

  @ParameterizedTest
  @CsvSource({"callable, redis", "future, redis", "deferred, redis", "callable, postgres"})
  void aShutdownAfterTheTimeoutStillRecordsTheSendAndTheRestartReplaysIt(String kind, String store)
      throws Exception {
    String key = EndpointClient.newKey();
    String path = "/probe/shutdown/" + kind;
    ProbeController.gate = new CountDownLatch(1);
    int before = ProbeController.runs.get();
    CountDownLatch closing = new CountDownLatch(1);
    ConfigurableApplicationContext first = start(store, closing);
    CompletableFuture<Void> closed;
    HttpResponse<byte[]> timedOut;
    try {
      port = first.getEnvironment().getRequiredProperty("local.server.port", Integer.class);
      timedOut = post(path, key, "{}");
      closed = CompletableFuture.runAsync(first::close);
      assertThat(closing.await(30, TimeUnit.SECONDS)).as("the shutdown began").isTrue();
      // the shutdown goes on while the send is held; let it be under way
      Thread.sleep(500);
    } finally {
      ProbeController.gate.countDown();
    }
    closed.get(60, TimeUnit.SECONDS);

    HttpResponse<byte[]> replay;
    try (ConfigurableApplicationContext second = start(store, new CountDownLatch(1))) {
      port = second.getEnvironment().getRequiredProperty("local.server.port", Integer.class);
      long deadline = System.nanoTime() + Duration.ofSeconds(15).toNanos();
      do {
        replay = post(path, key, "{}");
      } while (replay.statusCode() == 409 && System.nanoTime() < deadline);
    }
    String answers =
        String.format(
            "first %s %s; after the restart %s replayed=%s %s",
            timedOut.statusCode(),
            EndpointClient.text(timedOut),
            replay.statusCode(),
            EndpointClient.header(replay, "Idempotent-Replayed"),
            EndpointClient.text(replay));
    assertThat(timedOut.statusCode()).as(answers).isEqualTo(409);
    assertThat(ProbeController.runs.get() - before).as("handler runs (%s)", answers).isEqualTo(1);
    assertThat(replay.statusCode()).as(answers).isEqualTo(201);
    assertThat(EndpointClient.header(replay, "Idempotent-Replayed")).as(answers).isEqualTo("true");
    assertThat(EndpointClient.text(replay)).as(answers).contains("sent-" + (before + 1) + "\"");
  }

  /**
   * The contrast: the same shutdown while the request is still in flight (a {@code WebAsyncTask}
   * with its own 60 s timeout, so no timeout; Boot's graceful shutdown waits for the request, which
   * ends before Spring Data Redis's factory stops): the send is recorded and the restarted
   * application replays it.
   */
  @ParameterizedTest
  @ValueSource(strings = {"redis"})
  void aShutdownWhileTheRequestIsInFlightRecordsTheSend(String store) throws Exception {
    String key = EndpointClient.newKey();
    String path = "/probe/shutdown/task-long";
    ProbeController.gate = new CountDownLatch(1);
    int before = ProbeController.runs.get();
    CountDownLatch closing = new CountDownLatch(1);
    ConfigurableApplicationContext first = start(store, closing);
    CompletableFuture<Void> closed;
    CompletableFuture<HttpResponse<byte[]>> answered;
    try {
      port = first.getEnvironment().getRequiredProperty("local.server.port", Integer.class);
      answered =
          CompletableFuture.supplyAsync(
              () -> {
                try {
                  return post(path, key, "{}");
                } catch (Exception e) {
                  throw new IllegalStateException(e);
                }
              });
      long started = System.nanoTime() + Duration.ofSeconds(20).toNanos();
      while (ProbeController.runs.get() == before && System.nanoTime() < started) {
        Thread.sleep(10);
      }
      closed = CompletableFuture.runAsync(first::close);
      assertThat(closing.await(30, TimeUnit.SECONDS)).as("the shutdown began").isTrue();
      Thread.sleep(500);
    } finally {
      ProbeController.gate.countDown();
    }
    closed.get(60, TimeUnit.SECONDS);
    // the client may get no answer at all (the connection closed by the shutdown: seen once on
    // Boot 3.5, 'HTTP/1.1 header parser received no bytes'); the send must be recorded all the same
    String firstAnswer =
        answered
            .handle(
                (response, failure) ->
                    failure != null
                        ? "no answer: " + failure
                        : response.statusCode() + " " + EndpointClient.text(response))
            .get(60, TimeUnit.SECONDS);

    HttpResponse<byte[]> replay;
    try (ConfigurableApplicationContext second = start(store, new CountDownLatch(1))) {
      port = second.getEnvironment().getRequiredProperty("local.server.port", Integer.class);
      long deadline = System.nanoTime() + Duration.ofSeconds(15).toNanos();
      do {
        replay = post(path, key, "{}");
      } while (replay.statusCode() == 409 && System.nanoTime() < deadline);
    }
    String answers =
        String.format(
            "first %s; after the restart %s replayed=%s %s",
            firstAnswer,
            replay.statusCode(),
            EndpointClient.header(replay, "Idempotent-Replayed"),
            EndpointClient.text(replay));
    assertThat(ProbeController.runs.get() - before).as("handler runs (%s)", answers).isEqualTo(1);
    assertThat(replay.statusCode()).as(answers).isEqualTo(201);
    assertThat(EndpointClient.header(replay, "Idempotent-Replayed")).as(answers).isEqualTo("true");
  }

  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ProbeController.class)
  static class ProbeApplication {}

  @RestController
  static class ProbeController {
    static final AtomicInteger runs = new AtomicInteger();
    static volatile CountDownLatch gate = new CountDownLatch(1);
    private static final ExecutorService PROVIDER = Executors.newCachedThreadPool();

    /**
     * Sends that ended (the provider accepted the message), for MvcShutdownPhaseTimeoutProbeTest.
     */
    static final AtomicInteger sent = new AtomicInteger();

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
    @PostMapping("/probe/shutdown/callable")
    Callable<ResponseEntity<Map<String, String>>> callable() {
      int run = runs.incrementAndGet();
      return () -> send(run);
    }

    @IdempotentEndpoint
    @PostMapping("/probe/shutdown/future")
    CompletableFuture<ResponseEntity<Map<String, String>>> future() {
      int run = runs.incrementAndGet();
      return CompletableFuture.supplyAsync(() -> send(run), PROVIDER);
    }

    @IdempotentEndpoint
    @PostMapping("/probe/shutdown/task-long")
    WebAsyncTask<ResponseEntity<Map<String, String>>> taskLong() {
      int run = runs.incrementAndGet();
      return new WebAsyncTask<>(60_000L, () -> send(run));
    }

    @IdempotentEndpoint
    @PostMapping("/probe/shutdown/deferred")
    DeferredResult<ResponseEntity<Map<String, String>>> deferred() {
      int run = runs.incrementAndGet();
      DeferredResult<ResponseEntity<Map<String, String>>> result = new DeferredResult<>();
      PROVIDER.execute(() -> result.setResult(send(run)));
      return result;
    }
  }
}
