package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.spring.web.MvcQueuedWorkProbeTest.QueuedWork;
import dev.idempotency.testservers.Poll;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * Probe (probeG) of c1bdd8f, the shutdown side of {@link MvcQueuedWorkProbeTest}: work still queued
 * in Spring MVC's async executor (one thread, held by an unguarded request) when the server stops
 * was abandoned and its key released, "nothing was sent"; since fixqueue the starter takes it over
 * and runs it (docs/spring-boot.md, "Shutdown", step 3). Here the guarded handler sent in its
 * method body before it returned the queued work (a {@code StreamingResponseBody} writing the
 * receipt, or a {@code Callable} formatting it). Redis, graceful phase 1 s, then a restart on the
 * same store and the retry; the application started again is the next row's first ({@link
 * RestartChain}).
 */
class MvcQueuedWorkAtShutdownProbeTest implements EndpointClient {

  private int port;

  @Override
  public int port() {
    return port;
  }

  @Override
  public int runs() {
    return QueuedWork.entered.get();
  }

  /** Each row's application started again is the next row's first (one start less a row). */
  private static final RestartChain APPLICATIONS = new RestartChain();

  @AfterAll
  static void closeTheLastApplication() {
    APPLICATIONS.close();
  }

  private static ConfigurableApplicationContext start() {
    return MvcProbes.startOn(
        MvcQueuedWorkProbeTest.QueuedWorkApplication.class,
        "redis",
        new CountDownLatch(1),
        "spring.lifecycle.timeout-per-shutdown-phase=1s",
        "spring.mvc.async.request-timeout=120s",
        "spring.task.execution.pool.core-size=1",
        "spring.task.execution.pool.max-size=1");
  }

  private static boolean isClosed(IdempotencyGuard guard) {
    try {
      guard.execute("probe-closing:" + UUID.randomUUID(), Duration.ofMinutes(1), c -> "nothing");
      return false;
    } catch (IllegalStateException closed) {
      return true;
    }
  }

  /**
   * Was an open finding (medium-high, a second send; SPEC 1), fixed by fixqueue: the interceptor's
   * stop takes the queued work over and the starter runs it within the guard's close grace, the key
   * claimed. The handler method sent; its queued work was abandoned at the shutdown and the key
   * released, so the retry after the restart ran the handler again and sent a second time (both
   * rows, Boot 3.5 and 4.0, commit c1701d4: "sends for the key (before the restart 1; first answer
   * no answer: ... header parser received no bytes; after the restart 201 replayed=null {"send":2})
   * expected: 1 but was: 2"). Same cause as {@link
   * MvcQueuedWorkProbeTest#aHandlerThatSentBeforeItsWorkWasQueuedIsNotRunAgainByTheRetry}.
   */
  @ParameterizedTest
  @ValueSource(strings = {"/probeG/send-then-stream", "/probeG/send-then-callable"})
  void aHandlerThatSentBeforeItsWorkWasQueuedIsNotRunAgainAfterTheRestart(String path)
      throws Exception {
    String key = EndpointClient.newKey();
    CountDownLatch release = new CountDownLatch(1);
    QueuedWork.release = release;
    QueuedWork.blockStarted = new CountDownLatch(1);
    ConfigurableApplicationContext first =
        APPLICATIONS.first("redis", new CountDownLatch(1), closing -> start());
    CompletableFuture<Void> closed;
    CompletableFuture<HttpResponse<byte[]>> answered;
    try {
      port = MvcProbes.portOf(first);
      IdempotencyGuard guard = first.getBean(IdempotencyGuard.class);
      MvcProbes.postAsync(this, "/probeG/block", null);
      assertThat(QueuedWork.blockStarted.await(30, TimeUnit.SECONDS))
          .as("the blocking task holds the executor's only thread")
          .isTrue();
      answered = MvcProbes.postAsync(this, path, key);
      Poll.within(Duration.ofSeconds(30))
          .until("the handler method sent", () -> QueuedWork.sendsOf(key) == 1);
      closed = CompletableFuture.runAsync(first::close);
      Poll.within(Duration.ofSeconds(60)).until("the guard closing", () -> isClosed(guard));
    } finally {
      release.countDown();
    }
    closed.get(60, TimeUnit.SECONDS);
    String firstAnswer = MvcProbes.answerOf(answered);
    int sendsBeforeRestart = QueuedWork.sendsOf(key);

    port = MvcProbes.portOf(APPLICATIONS.again("redis", () -> start()));
    HttpResponse<byte[]> retry = MvcProbes.retryWhileInProgress(this, path, key);
    assertThat(QueuedWork.sendsOf(key))
        .as(
            "sends for the key (before the restart %d; first answer %s; after the restart %s)",
            sendsBeforeRestart, firstAnswer, MvcProbes.replayed(retry))
        .isEqualTo(1);
  }

  /**
   * Finding C of probeG (suspected from reading, fixed by fixnested): a {@code Callable} sends,
   * then returns more async work (a {@code StreamingResponseBody}, a {@code Callable}) queued
   * behind a busy executor when the server stops. Before the fix the later stage's shield set the
   * work back to "queued", so the shutdown abandoned it and released the key after the first stage
   * sent; now it is recorded as answered without its body, and the retry after the restart does not
   * send.
   */
  @ParameterizedTest
  @ValueSource(strings = {"/probeG/callable-then-stream", "/probeG/callable-then-callable"})
  void aLaterStageQueuedAtShutdownIsNotRunAgainAfterTheRestart(String path) throws Exception {
    String key = EndpointClient.newKey();
    CountDownLatch release = new CountDownLatch(1);
    QueuedWork.release = release;
    QueuedWork.blockStarted = new CountDownLatch(1);
    ConfigurableApplicationContext first =
        APPLICATIONS.first("redis", new CountDownLatch(1), closing -> start());
    CompletableFuture<Void> closed;
    CompletableFuture<HttpResponse<byte[]>> answered;
    try {
      port = MvcProbes.portOf(first);
      IdempotencyGuard guard = first.getBean(IdempotencyGuard.class);
      answered = MvcProbes.postAsync(this, path, key);
      // the first stage sends, then hands the executor a task that holds its only thread
      assertThat(QueuedWork.blockStarted.await(30, TimeUnit.SECONDS))
          .as("the first stage ran and the executor's only thread is held")
          .isTrue();
      assertThat(QueuedWork.sendsOf(key)).isOne();
      closed = CompletableFuture.runAsync(first::close);
      Poll.within(Duration.ofSeconds(60)).until("the guard closing", () -> isClosed(guard));
    } finally {
      release.countDown();
    }
    closed.get(60, TimeUnit.SECONDS);
    String firstAnswer = MvcProbes.answerOf(answered);

    port = MvcProbes.portOf(APPLICATIONS.again("redis", () -> start()));
    HttpResponse<byte[]> retry = MvcProbes.retryWhileInProgress(this, path, key);
    assertThat(QueuedWork.sendsOf(key))
        .as(
            "sends for the key (first answer %s; after the restart %s)",
            firstAnswer, MvcProbes.replayed(retry))
        .isEqualTo(1);
  }
}
