package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.http.HttpClient;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.context.annotation.Import;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.context.request.async.WebAsyncTask;
import org.springframework.web.servlet.mvc.method.annotation.StreamingResponseBody;

/**
 * Issue 37 (SPEC 13, 16): a {@code Callable} endpoint (or a {@code WebAsyncTask}, or a {@code
 * StreamingResponseBody}) whose task is still queued in Spring MVC's async executor (Boot's {@code
 * applicationTaskExecutor}, here one thread, held by another request) when the container async
 * timeout fires. Spring MVC cancels the queued task; the starter takes the work over and runs it
 * itself (fixqueue), the key claimed meanwhile: the timed-out client gets the starter's 409 (a
 * {@code Callable}), the task's own timeout answer, or Spring's 503 (a stream), the work sends
 * once, its result is stored, and the retry gets it replayed. It used to answer 409 and keep the
 * key claimed waiting for a result that never came (every retry got 409); then the queued work was
 * abandoned and its key released, so the retry ran the handler again, a second send when the
 * handler method had sent before it returned the work (MvcQueuedWorkProbeTest). A task that started
 * before the timeout keeps its key claimed (AsyncTimeoutEndpointTest).
 */
@SpringBootTest(
    classes = QueuedCallableTimeoutTest.QueuedApp.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
    properties = {
      "idempotency.store=memory",
      // Tomcat looks for expired async requests once a second: 500 ms fires at the next look
      // (1 s fired 1 to 2 s in); the work is queued behind a held thread, so it always times out
      "spring.mvc.async.request-timeout=500ms",
      "spring.task.execution.pool.core-size=1",
      "spring.task.execution.pool.max-size=1"
    })
class QueuedCallableTimeoutTest {

  private static final HttpClient HTTP =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

  @LocalServerPort int port;
  @Autowired QueueState state;

  @ParameterizedTest
  @CsvSource({"/queued/callable, 409", "/queued/task-on-timeout, 202", "/queued/stream, 503"})
  void aTaskCancelledInTheExecutorQueueIsTakenOverSendsOnceAndIsReplayed(
      String path, int timedOutStatus) throws Exception {
    int sendsBefore = state.sends.get();
    int enteredBefore = state.handlerEntered.get();
    CountDownLatch release = new CountDownLatch(1);
    state.release = release;
    state.blockStarted = new CountDownLatch(1);
    // the only task thread is busy with another (not guarded) request's work
    CompletableFuture<HttpResponse<byte[]>> blocking =
        MvcProbes.sendAsync(port, "/queued/block", null);
    assertThat(state.blockStarted.await(30, TimeUnit.SECONDS))
        .as("the blocking task holds the executor's only thread")
        .isTrue();

    String key = "\"" + UUID.randomUUID() + "\"";
    HttpResponse<byte[]> timedOut;
    HttpResponse<byte[]> last;
    try {
      timedOut = MvcProbes.sendAsync(port, path, key).get(30, TimeUnit.SECONDS);
      // the starter runs the work while the executor is still held: bounded polling, 20 s
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
      do {
        last = MvcProbes.sendAsync(port, path, key).get(30, TimeUnit.SECONDS);
      } while (last.statusCode() == 409 && System.nanoTime() < deadline);
    } finally {
      release.countDown();
    }
    blocking.get(30, TimeUnit.SECONDS);
    assertThat(timedOut.statusCode()).as(text(timedOut)).isEqualTo(timedOutStatus);
    assertThat(last.statusCode())
        .as(
            "a retry while the executor is held (handler entered %d times, work run %d times): %s",
            state.handlerEntered.get() - enteredBefore, state.sends.get() - sendsBefore, text(last))
        .isEqualTo(201);
    assertThat(last.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(new String(last.body(), StandardCharsets.UTF_8)).contains("\"send\"");
    assertThat(state.handlerEntered.get() - enteredBefore).as("handler runs").isEqualTo(1);
    assertThat(state.sends.get() - sendsBefore).as("one provider send").isEqualTo(1);

    HttpResponse<byte[]> replay = MvcProbes.sendAsync(port, path, key).get(30, TimeUnit.SECONDS);
    assertThat(replay.statusCode()).as(text(replay)).isEqualTo(201);
    assertThat(replay.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(state.sends.get() - sendsBefore).as("still one provider send").isEqualTo(1);
  }

  /**
   * Work taken over at the timeout that fails is decided as a synchronous handler that throws: a
   * {@code Callable}'s failure that nothing maps, or a stream's own failure before it wrote, sent
   * nothing, so the key is released and the retry runs the handler again, which sends once.
   */
  @ParameterizedTest
  @CsvSource({"/queued/failing-callable, 409", "/queued/failing-stream, 503"})
  void aTakenOverTaskThatFailsReleasesItsKeyAndTheRetrySendsOnce(String path, int timedOutStatus)
      throws Exception {
    int sendsBefore = state.sends.get();
    int enteredBefore = state.handlerEntered.get();
    int failedBefore = state.failed.get();
    state.failNext.set(true);
    CountDownLatch release = new CountDownLatch(1);
    state.release = release;
    state.blockStarted = new CountDownLatch(1);
    CompletableFuture<HttpResponse<byte[]>> blocking =
        MvcProbes.sendAsync(port, "/queued/block", null);
    assertThat(state.blockStarted.await(30, TimeUnit.SECONDS))
        .as("the blocking task holds the executor's only thread")
        .isTrue();

    String key = "\"" + UUID.randomUUID() + "\"";
    HttpResponse<byte[]> timedOut;
    HttpResponse<byte[]> last;
    try {
      timedOut = MvcProbes.sendAsync(port, path, key).get(30, TimeUnit.SECONDS);
      long failedBy = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
      while (state.failed.get() == failedBefore && System.nanoTime() < failedBy) {
        Thread.sleep(10);
      }
    } finally {
      release.countDown();
    }
    blocking.get(30, TimeUnit.SECONDS);
    assertThat(timedOut.statusCode()).as(text(timedOut)).isEqualTo(timedOutStatus);
    assertThat(state.failed.get() - failedBefore).as("the taken-over work failed").isOne();
    // bounded polling, 20 s: the key is free again, and the retry's own work runs
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    do {
      last = MvcProbes.sendAsync(port, path, key).get(30, TimeUnit.SECONDS);
    } while (last.statusCode() != 201 && System.nanoTime() < deadline);
    assertThat(last.statusCode())
        .as(
            "the retry (handler entered %d times, sends %d): %s",
            state.handlerEntered.get() - enteredBefore, state.sends.get() - sendsBefore, text(last))
        .isEqualTo(201);
    assertThat(state.handlerEntered.get() - enteredBefore).as("handler runs").isEqualTo(2);
    assertThat(state.sends.get() - sendsBefore).as("one provider send").isEqualTo(1);
  }

  private static String text(HttpResponse<byte[]> response) {
    return response.statusCode() + " " + new String(response.body());
  }

  @SpringBootConfiguration
  @EnableAutoConfiguration
  @Import({QueueController.class, QueueState.class})
  static class QueuedApp {}

  /** What the controller did (a bean of its own: the guarded controller is a proxy). */
  static class QueueState {
    volatile CountDownLatch blockStarted = new CountDownLatch(1);
    volatile CountDownLatch release = new CountDownLatch(1);
    final AtomicInteger handlerEntered = new AtomicInteger();
    final AtomicInteger sends = new AtomicInteger();
    final AtomicBoolean failNext = new AtomicBoolean();
    final AtomicInteger failed = new AtomicInteger();
  }

  @RestController
  static class QueueController {
    private final QueueState state;

    QueueController(QueueState state) {
      this.state = state;
    }

    /**
     * Not guarded: holds the async executor's only thread until the test releases it, through its
     * own request's timeout (whose interrupt it ignores, as a slow blocking call would).
     */
    @PostMapping("/queued/block")
    public Callable<String> block() {
      CountDownLatch started = state.blockStarted;
      CountDownLatch release = state.release;
      return () -> {
        started.countDown();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (release.getCount() > 0 && System.nanoTime() < deadline) {
          try {
            release.await(100, TimeUnit.MILLISECONDS);
          } catch (InterruptedException timeoutCancel) {
            // Spring MVC's cancel at this request's own timeout: keep the thread busy regardless
          }
        }
        return "done";
      };
    }

    @PostMapping("/queued/callable")
    @IdempotentEndpoint
    public Callable<ResponseEntity<Map<String, Object>>> callable() {
      state.handlerEntered.incrementAndGet();
      return this::send;
    }

    @PostMapping("/queued/task-on-timeout")
    @IdempotentEndpoint
    public WebAsyncTask<ResponseEntity<Map<String, Object>>> task() {
      state.handlerEntered.incrementAndGet();
      WebAsyncTask<ResponseEntity<Map<String, Object>>> task = new WebAsyncTask<>(this::send);
      task.onTimeout(() -> ResponseEntity.status(202).body(Map.of("queued", true)));
      return task;
    }

    @PostMapping("/queued/stream")
    @IdempotentEndpoint
    public ResponseEntity<StreamingResponseBody> stream() {
      state.handlerEntered.incrementAndGet();
      return ResponseEntity.status(201)
          .contentType(MediaType.APPLICATION_JSON)
          .body(
              out ->
                  out.write(
                      ("{\"send\":" + state.sends.incrementAndGet() + "}")
                          .getBytes(StandardCharsets.UTF_8)));
    }

    @PostMapping("/queued/failing-callable")
    @IdempotentEndpoint
    public Callable<ResponseEntity<Map<String, Object>>> failingCallable() {
      state.handlerEntered.incrementAndGet();
      return () -> {
        refuseIfAsked();
        return send();
      };
    }

    @PostMapping("/queued/failing-stream")
    @IdempotentEndpoint
    public ResponseEntity<StreamingResponseBody> failingStream() {
      state.handlerEntered.incrementAndGet();
      return ResponseEntity.status(201)
          .contentType(MediaType.APPLICATION_JSON)
          .body(
              out -> {
                refuseIfAsked();
                out.write(
                    ("{\"send\":" + state.sends.incrementAndGet() + "}")
                        .getBytes(StandardCharsets.UTF_8));
              });
    }

    /** The provider refuses once when the test asks: nothing sent. */
    private void refuseIfAsked() {
      if (state.failNext.compareAndSet(true, false)) {
        state.failed.incrementAndGet();
        throw new IllegalStateException("the provider refused; nothing sent");
      }
    }

    private ResponseEntity<Map<String, Object>> send() {
      int n = state.sends.incrementAndGet();
      return ResponseEntity.status(201).body(Map.of("send", n));
    }
  }
}
