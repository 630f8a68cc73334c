package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.spring.web.MvcProbes.HeldSends;
import dev.idempotency.testservers.Poll;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.SmartLifecycle;

/**
 * probeE: the application shuts down (its context closed, as on SIGTERM; Boot's graceful shutdown,
 * then the guard's close with its grace period) while an async handler's send runs whose request
 * already timed out (container async timeout 500 ms: the client got 409, the request ended, so
 * Boot's graceful shutdown does not wait for it). SPEC 14, 16: calls running when close() starts
 * finish as they would have, their outcomes recorded within the grace period (here 20 s); the
 * application started again on the same store replays the send: one provider send, no lost send.
 * The application started again is the next row's first on that store ({@link RestartChain}).
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
    return HeldSends.runs.get();
  }

  /** Each row's application started again is the next row's first, on the same store. */
  private static final RestartChain APPLICATIONS = new RestartChain();

  @AfterAll
  static void closeTheLastApplication() {
    APPLICATIONS.close();
  }

  private static ConfigurableApplicationContext start(String store, CountDownLatch closing) {
    // Tomcat looks for expired async requests once a second: 500 ms fires at the next look (1 s
    // fired 1 to 2 s in); the send is held until the client has the timeout's answer
    return MvcProbes.startOn(
        MvcProbes.HeldSendApplication.class,
        store,
        closing,
        "spring.mvc.async.request-timeout=500ms");
  }

  @ParameterizedTest
  @CsvSource({"callable, redis", "future, redis", "deferred, redis", "callable, postgres"})
  void aShutdownAfterTheTimeoutStillRecordsTheSendAndTheRestartReplaysIt(String kind, String store)
      throws Exception {
    String key = EndpointClient.newKey();
    String path = "/probe/held/" + kind;
    HeldSends.gate = new CountDownLatch(1);
    int before = HeldSends.runs.get();
    CountDownLatch closing = new CountDownLatch(1);
    ConfigurableApplicationContext first =
        APPLICATIONS.first(store, closing, latch -> start(store, latch));
    CompletableFuture<Void> closed;
    HttpResponse<byte[]> timedOut;
    try {
      port = MvcProbes.portOf(first);
      IdempotencyGuard guard = first.getBean(IdempotencyGuard.class);
      timedOut = post(path, key, "{}");
      closed = CompletableFuture.runAsync(first::close);
      assertThat(closing.await(30, TimeUnit.SECONDS)).as("the shutdown began").isTrue();
      // the shutdown goes on while the send is held, up to the guard's close (after the web
      // server's graceful phase and stop): the send ends within the guard's grace period
      Poll.within(Duration.ofSeconds(60)).until("the guard closing", () -> isClosed(guard));
    } finally {
      HeldSends.gate.countDown();
    }
    closed.get(60, TimeUnit.SECONDS);

    HttpResponse<byte[]> replay = replayAfterRestart(store, path, key);
    String answers =
        String.format(
            "first %s %s; after the restart %s",
            timedOut.statusCode(), EndpointClient.text(timedOut), MvcProbes.replayed(replay));
    assertThat(timedOut.statusCode()).as(answers).isEqualTo(409);
    assertThat(HeldSends.runs.get() - before).as("handler runs (%s)", answers).isEqualTo(1);
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
    String path = "/probe/held/task-long";
    HeldSends.gate = new CountDownLatch(1);
    int before = HeldSends.runs.get();
    CountDownLatch closing = new CountDownLatch(1);
    ConfigurableApplicationContext first =
        APPLICATIONS.first(store, closing, latch -> start(store, latch));
    CompletableFuture<Void> closed;
    CompletableFuture<HttpResponse<byte[]>> answered;
    try {
      port = MvcProbes.portOf(first);
      SmartLifecycle gracefulShutdown = gracefulShutdownOf(first);
      answered = MvcProbes.postAsync(this, path, key);
      MvcProbes.awaitHandlerStart(HeldSends.runs::get, before);
      closed = CompletableFuture.runAsync(first::close);
      assertThat(closing.await(30, TimeUnit.SECONDS)).as("the shutdown began").isTrue();
      // the web server's graceful shutdown began, and waits for this request
      Poll.within(Duration.ofSeconds(30))
          .until("the graceful shutdown began", () -> !gracefulShutdown.isRunning());
    } finally {
      HeldSends.gate.countDown();
    }
    closed.get(60, TimeUnit.SECONDS);
    // the client may get no answer at all (the connection closed by the shutdown: seen once on
    // Boot 3.5, 'HTTP/1.1 header parser received no bytes'); the send must be recorded all the same
    String firstAnswer = MvcProbes.answerOf(answered);

    HttpResponse<byte[]> replay = replayAfterRestart(store, path, key);
    String answers =
        String.format("first %s; after the restart %s", firstAnswer, MvcProbes.replayed(replay));
    assertThat(HeldSends.runs.get() - before).as("handler runs (%s)", answers).isEqualTo(1);
    assertThat(replay.statusCode()).as(answers).isEqualTo(201);
    assertThat(EndpointClient.header(replay, "Idempotent-Replayed")).as(answers).isEqualTo("true");
  }

  /** Whether the guard refuses new calls: its close began. */
  private static boolean isClosed(IdempotencyGuard guard) {
    try {
      guard.execute("probe-closing:" + UUID.randomUUID(), Duration.ofMinutes(1), c -> "nothing");
      return false;
    } catch (IllegalStateException closed) {
      return true;
    }
  }

  /**
   * Spring Boot's lifecycle bean of the web server's graceful shutdown (its package differs between
   * Boot 3.5 and 4.0): not running once the graceful shutdown began.
   */
  private static SmartLifecycle gracefulShutdownOf(ConfigurableApplicationContext application) {
    return application.getBeansOfType(SmartLifecycle.class).values().stream()
        .filter(
            bean -> bean.getClass().getSimpleName().equals("WebServerGracefulShutdownLifecycle"))
        .findFirst()
        .orElseThrow(() -> new AssertionError("no graceful shutdown (server.shutdown=graceful)"));
  }

  private HttpResponse<byte[]> replayAfterRestart(String store, String path, String key)
      throws Exception {
    port = MvcProbes.portOf(APPLICATIONS.again(store, () -> start(store, new CountDownLatch(1))));
    return MvcProbes.retryWhileInProgress(this, path, key);
  }
}
