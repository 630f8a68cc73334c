package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.testservers.Poll;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.context.annotation.Import;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.servlet.mvc.method.annotation.StreamingResponseBody;

/**
 * A {@code StreamingResponseBody} whose request a container async timeout (1 s) ends before the
 * stream wrote anything, its work still running: the outcome is decided at the stream's end. Its
 * own failure, before it wrote, means nothing was sent: the key is released and the retry runs it
 * again (it used to be recorded as answered without its body at the timeout: the retry got 422
 * {@code response-not-stored} and the notification was lost for the window, SPEC 1). A stream that
 * writes after the timeout sent: it is recorded as answered without its body, and the retry gets
 * 422, never a second send. While it runs, a retry gets 409.
 */
@SpringBootTest(
    classes = MvcStreamTimeoutEndTest.StreamApp.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
    properties = {"idempotency.store=memory", "spring.mvc.async.request-timeout=1s"})
class MvcStreamTimeoutEndTest {

  private static final HttpClient HTTP =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

  @LocalServerPort int port;
  @Autowired StreamState state;

  @Test
  void aStreamThatFailsBeforeItWroteAfterTheTimeoutIsRunAgainByTheRetry() throws Exception {
    String key = "\"" + UUID.randomUUID() + "\"";
    int runsBefore = state.runs.get();
    int sendsBefore = state.sends.get();
    int failedBefore = state.failed.get();
    state.gate = new CountDownLatch(1);
    state.failNext.set(true);
    HttpResponse<byte[]> timedOut;
    HttpResponse<byte[]> whileItRuns;
    try {
      timedOut = post(key);
      whileItRuns = post(key);
    } finally {
      state.gate.countDown();
    }
    assertThat(timedOut.statusCode()).as(text(timedOut)).isEqualTo(503);
    assertThat(whileItRuns.statusCode()).as(text(whileItRuns)).isEqualTo(409);
    Poll.within(Duration.ofSeconds(30))
        .until("the stream's own failure", () -> state.failed.get() - failedBefore == 1);

    HttpResponse<byte[]> retry = retryUntilNot409(key);
    assertThat(retry.statusCode()).as(text(retry)).isEqualTo(200);
    assertThat(text(retry)).contains("sent-");
    assertThat(state.runs.get() - runsBefore).as("stream runs").isEqualTo(2);
    assertThat(state.sends.get() - sendsBefore).as("sends").isEqualTo(1);
  }

  @Test
  void aStreamThatWritesAfterTheTimeoutIsNotRunAgain() throws Exception {
    String key = "\"" + UUID.randomUUID() + "\"";
    int runsBefore = state.runs.get();
    int sendsBefore = state.sends.get();
    int endedBefore = state.ended.get();
    state.gate = new CountDownLatch(1);
    state.failNext.set(false);
    HttpResponse<byte[]> timedOut;
    try {
      timedOut = post(key);
    } finally {
      state.gate.countDown();
    }
    assertThat(timedOut.statusCode()).as(text(timedOut)).isEqualTo(503);
    Poll.within(Duration.ofSeconds(30))
        .until("the stream's end", () -> state.ended.get() - endedBefore == 1);

    HttpResponse<byte[]> retry = retryUntilNot409(key);
    assertThat(retry.statusCode()).as(text(retry)).isEqualTo(422);
    assertThat(text(retry)).contains("response-not-stored");
    assertThat(state.runs.get() - runsBefore).as("stream runs").isEqualTo(1);
    assertThat(state.sends.get() - sendsBefore).as("sends").isEqualTo(1);
  }

  /** Retries while the key is claimed (409), for at most 30 s. */
  private HttpResponse<byte[]> retryUntilNot409(String key) throws Exception {
    return Poll.within(Duration.ofSeconds(30))
        .every(Duration.ofMillis(100))
        .until(
            "an answer other than 409", () -> post(key), response -> response.statusCode() != 409);
  }

  private HttpResponse<byte[]> post(String key) throws Exception {
    return HTTP.send(
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/timed/stream"))
            .timeout(Duration.ofSeconds(60))
            .header("Content-Type", "application/json")
            .header("Idempotency-Key", key)
            .POST(HttpRequest.BodyPublishers.ofString("{}"))
            .build(),
        HttpResponse.BodyHandlers.ofByteArray());
  }

  private static String text(HttpResponse<byte[]> response) {
    return response.statusCode() + " " + new String(response.body(), StandardCharsets.UTF_8);
  }

  @SpringBootConfiguration
  @EnableAutoConfiguration
  @Import({StreamController.class, StreamState.class})
  static class StreamApp {}

  /** What the stream did (a bean of its own: the guarded controller is a proxy). */
  static class StreamState {
    final AtomicInteger runs = new AtomicInteger();
    final AtomicInteger sends = new AtomicInteger();
    final AtomicInteger failed = new AtomicInteger();
    final AtomicInteger ended = new AtomicInteger();
    final AtomicBoolean failNext = new AtomicBoolean();
    volatile CountDownLatch gate = new CountDownLatch(0);
  }

  @RestController
  static class StreamController {
    private final StreamState state;

    StreamController(StreamState state) {
      this.state = state;
    }

    /**
     * The provider call is held (at most 30 s) until the test opens the gate; it refuses once
     * (nothing sent, nothing written) when {@code failNext} is set.
     */
    @PostMapping("/timed/stream")
    @IdempotentEndpoint
    public StreamingResponseBody stream() {
      int run = state.runs.incrementAndGet();
      return out -> {
        try {
          state.gate.await(30, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
        if (state.failNext.compareAndSet(true, false)) {
          state.failed.incrementAndGet();
          throw new IllegalStateException("the provider refused; nothing sent");
        }
        state.sends.incrementAndGet();
        try {
          out.write(("sent-" + run).getBytes(StandardCharsets.UTF_8));
          out.flush();
        } finally {
          state.ended.incrementAndGet();
        }
      };
    }
  }
}
