package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.context.annotation.Import;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.servlet.mvc.method.annotation.SseEmitter;
import org.springframework.web.servlet.mvc.method.annotation.StreamingResponseBody;

/**
 * Issue 37, SPEC 13 and 16 (found by the probe37c re-probe), real HTTP on Tomcat: a guarded Spring
 * MVC stream whose request a container async timeout ends while its send still runs. Before the fix
 * such handlers ({@code ResponseEntity<SseEmitter>}, {@code StreamingResponseBody}, which Spring
 * MVC runs on its async executor and interrupts at the timeout) were answered 503 or 500 at the
 * timeout and their key released while the send ran, so the client's retry sent again. A stream
 * that a timeout ends is recorded as answered without its body: the retry gets 422 {@code
 * response-not-stored} (or 409 while it runs) and the provider gets one send.
 *
 * <p>The provider accepts the message, then its answer takes 3 s for the first attempt of a key
 * (the wait is interruptible, as {@code HttpClient.send}'s is); the container's async timeout is 1
 * s. ({@code ResponseEntity<Mono>} and a {@code CompletableFuture} subclass, which the probe found
 * too, now fail the start: {@link EndpointStartupTest}.)
 */
@SpringBootTest(
    classes = MvcStreamTimeoutTest.WrappedApp.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
    properties = {"idempotency.store=memory", "spring.mvc.async.request-timeout=1s"})
class MvcStreamTimeoutTest {

  private static final HttpClient HTTP =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

  static final ExecutorService APPLICATION_EXECUTOR = Executors.newCachedThreadPool();

  @LocalServerPort int port;
  @Autowired SendState state;

  @AfterAll
  static void stopExecutor() {
    APPLICATION_EXECUTOR.shutdownNow();
  }

  @ParameterizedTest
  @ValueSource(strings = {"/wrapped/entity-of-sse", "/wrapped/streaming"})
  void aTimedOutRequestsSendIsNotSentAgainByItsRetry(String path) throws Exception {
    int sendsBefore = state.sends.get();
    state.firstSendStarted = new CountDownLatch(1);
    String key = "\"" + UUID.randomUUID() + "\"";

    HttpResponse<byte[]> timedOut = postAsync(path, key).get(60, TimeUnit.SECONDS);
    assertThat(state.firstSendStarted.await(30, TimeUnit.SECONDS))
        .as("the work began (timed-out answer %s)", text(timedOut))
        .isTrue();

    // the client retries until it gets an answer other than 409 (the slow send takes about 3 s)
    HttpResponse<byte[]> last;
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    do {
      last = postAsync(path, key).get(60, TimeUnit.SECONDS);
    } while (last.statusCode() == 409 && System.nanoTime() < deadline);
    // a late second send (if the retry ran the handler again) has begun by now
    state.awaitQuiet();

    assertThat(state.sends.get() - sendsBefore)
        .as(
            "one provider send for one key (timed-out answer %s, last answer %s)",
            text(timedOut), text(last))
        .isEqualTo(1);
  }

  private CompletableFuture<HttpResponse<byte[]>> postAsync(String path, String key) {
    return post(port, path, key);
  }

  static CompletableFuture<HttpResponse<byte[]>> post(int port, String path, String key) {
    return HTTP.sendAsync(
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
            .timeout(Duration.ofSeconds(60))
            .header("Content-Type", "application/json")
            .header("Idempotency-Key", key)
            .POST(HttpRequest.BodyPublishers.ofString("{}"))
            .build(),
        HttpResponse.BodyHandlers.ofByteArray());
  }

  static String text(HttpResponse<byte[]> response) {
    return response.statusCode()
        + " "
        + new String(response.body(), StandardCharsets.UTF_8)
        + " replayed="
        + response.headers().firstValue("Idempotent-Replayed").orElse("-");
  }

  @SpringBootConfiguration
  @EnableAutoConfiguration
  @Import({WrappedController.class, SendState.class})
  static class WrappedApp {}

  /** What the provider got (a bean of its own: the guarded controller is a proxy). */
  static class SendState {
    final AtomicInteger sends = new AtomicInteger();
    final AtomicInteger running = new AtomicInteger();
    final Map<String, AtomicInteger> attempts = new ConcurrentHashMap<>();
    volatile CountDownLatch firstSendStarted = new CountDownLatch(1);

    /** Bounded wait until no send is running (a send takes at most 3 s). */
    void awaitQuiet() throws InterruptedException {
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
      while (running.get() > 0 && System.nanoTime() < deadline) {
        Thread.sleep(20);
      }
    }

    /**
     * The provider accepts the message, then its answer takes 3 s for the first attempt of a key;
     * the wait is interruptible, as {@code HttpClient.send}'s is.
     */
    String send(String key) throws InterruptedException {
      running.incrementAndGet();
      try {
        int n = sends.incrementAndGet();
        int attempt = attempts.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
        if (attempt == 1) {
          firstSendStarted.countDown();
          Thread.sleep(3000); // waiting for the provider's answer, after it accepted
        }
        return "sent-" + n;
      } finally {
        running.decrementAndGet();
      }
    }
  }

  @RestController
  static class WrappedController {
    private final SendState state;

    WrappedController(SendState state) {
      this.state = state;
    }

    @PostMapping("/wrapped/entity-of-sse")
    @IdempotentEndpoint
    public ResponseEntity<SseEmitter> entityOfSse(@RequestHeader("Idempotency-Key") String key) {
      return ResponseEntity.status(201).body(emitter(key));
    }

    @PostMapping("/wrapped/streaming")
    @IdempotentEndpoint
    public StreamingResponseBody streaming(@RequestHeader("Idempotency-Key") String key) {
      return streamingBody(key);
    }

    @PostMapping("/wrapped/entity-of-streaming")
    @IdempotentEndpoint
    public ResponseEntity<StreamingResponseBody> entityOfStreaming(
        @RequestHeader("Idempotency-Key") String key) {
      return ResponseEntity.status(201).body(streamingBody(key));
    }

    /** Run by Spring MVC on its async executor, interrupted at the timeout. */
    private StreamingResponseBody streamingBody(String key) {
      return out -> {
        try {
          out.write(state.send(key).getBytes(StandardCharsets.UTF_8));
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new java.io.InterruptedIOException("the provider's answer was interrupted");
        }
      };
    }

    /** An emitter the application completes from its own executor once the provider answered. */
    private SseEmitter emitter(String key) {
      SseEmitter emitter = new SseEmitter();
      APPLICATION_EXECUTOR.execute(
          () -> {
            try {
              String receipt = state.send(key);
              emitter.send(receipt);
              emitter.complete();
            } catch (Exception e) {
              emitter.completeWithError(e);
            }
          });
      return emitter;
    }
  }
}
