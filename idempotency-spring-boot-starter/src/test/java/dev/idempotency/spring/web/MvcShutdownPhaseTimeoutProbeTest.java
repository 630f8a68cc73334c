package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.spring.web.MvcProbes.HeldSends;
import dev.idempotency.testservers.Poll;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * Probe (probeT) of {@code GuardShutdown} with a short {@code
 * spring.lifecycle.timeout-per-shutdown-phase} (1 s) on Redis through Spring Data Redis: an MVC
 * request still in flight (a {@code WebAsyncTask} with its own 60 s timeout, a {@code Callable}, a
 * {@code CompletableFuture}, a {@code DeferredResult}; send held) when Boot's graceful shutdown
 * phase gives up after 1 s; the web server stops under it and the starter's phase starts closing
 * the guard; the send is released only then. SPEC 1/14: the guard's grace period records the send
 * before Lettuce's factory (phase 0) stops, and the restarted application replays it: one handler
 * run.
 *
 * <p>Was an open finding (medium-high, lost send): the endpoint's outcome was written only when the
 * async result was dispatched back to the server, which no longer happens once the server stopped;
 * the record stayed IN_PROGRESS ('Closed the idempotency guard with 1 calls still running after its
 * grace period'), the retry after the restart got 409 and, once the lease lapsed, sent again (Boot
 * 4.0 failed 3/3, Boot 3.5 1 of 3: 'expected: 201 but was: 409'). Now the interceptor, a lifecycle
 * bean that stops after the web server and before the guard closes, records such a request from its
 * async result.
 *
 * <p>The application started again on the store, which must replay each case's send, is one for the
 * class (each case has its own key): started at the first case's replay, closed after the last.
 * Only the first application of each case is shut down mid-send.
 */
class MvcShutdownPhaseTimeoutProbeTest implements EndpointClient {

  /** The application started again on each store, shared by the cases. */
  private static final Map<String, ConfigurableApplicationContext> RESTARTED = new HashMap<>();

  private int port;

  @AfterAll
  static void closeTheRestartedApplications() {
    RESTARTED.values().forEach(ConfigurableApplicationContext::close);
    RESTARTED.clear();
  }

  @Override
  public int port() {
    return port;
  }

  @Override
  public int runs() {
    return HeldSends.runs.get();
  }

  private static ConfigurableApplicationContext start(String store, CountDownLatch closing) {
    return MvcProbes.startOn(
        MvcProbes.HeldSendApplication.class,
        store,
        closing,
        "spring.lifecycle.timeout-per-shutdown-phase=1s");
  }

  private static boolean isClosed(IdempotencyGuard guard) {
    try {
      guard.execute("probe-closing:" + UUID.randomUUID(), Duration.ofMinutes(1), c -> "nothing");
      return false;
    } catch (IllegalStateException closed) {
      return true;
    }
  }

  @ParameterizedTest
  @CsvSource({"task-long, redis", "callable, redis", "future, redis", "deferred, redis"})
  void aRequestOutlivingTheGracefulPhaseIsRecordedAndReplayed(String kind, String store)
      throws Exception {
    String key = EndpointClient.newKey();
    String path = "/probe/held/" + kind;
    HeldSends.gate = new CountDownLatch(1);
    int before = runs();
    int sentBefore = HeldSends.sent.get();
    CountDownLatch closing = new CountDownLatch(1);
    ConfigurableApplicationContext first = start(store, closing);
    CompletableFuture<Void> closed;
    CompletableFuture<HttpResponse<byte[]>> answered;
    try {
      port = MvcProbes.portOf(first);
      IdempotencyGuard guard = first.getBean(IdempotencyGuard.class);
      answered = MvcProbes.postAsync(this, path, key);
      Poll.within(Duration.ofSeconds(30)).until("the handler running", () -> runs() > before);
      closed = CompletableFuture.runAsync(first::close);
      assertThat(closing.await(30, TimeUnit.SECONDS)).as("the shutdown began").isTrue();
      Poll.within(Duration.ofSeconds(60)).until("the guard closing", () -> isClosed(guard));
    } finally {
      HeldSends.gate.countDown();
    }
    closed.get(60, TimeUnit.SECONDS);
    assertThat(HeldSends.sent.get() - sentBefore)
        .as("the send happened during the shutdown")
        .isEqualTo(1);
    String firstAnswer = MvcProbes.answerOf(answered);

    ConfigurableApplicationContext restarted =
        RESTARTED.computeIfAbsent(store, stored -> start(stored, new CountDownLatch(1)));
    port = MvcProbes.portOf(restarted);
    HttpResponse<byte[]> replay = MvcProbes.retryWhileInProgress(this, path, key);
    String answers =
        String.format("first %s; after the restart %s", firstAnswer, MvcProbes.replayed(replay));
    assertThat(runs() - before).as("handler runs (%s)", answers).isEqualTo(1);
    assertThat(replay.statusCode()).as(answers).isEqualTo(201);
    assertThat(EndpointClient.header(replay, "Idempotent-Replayed")).as(answers).isEqualTo("true");
  }
}
