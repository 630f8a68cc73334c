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
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.context.annotation.Import;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.servlet.mvc.method.annotation.SseEmitter;

/**
 * An {@code SseEmitter} whose request a container async timeout (1 s) ends before it sent anything,
 * its work still running: the outcome is decided at the application's end of the emitter ({@code
 * AsyncWork.awaitEmitterEnd}), as for a {@code StreamingResponseBody} ({@link
 * MvcStreamTimeoutEndTest}). It used to be recorded as answered without its body at the timeout,
 * since Spring MVC marks a timed-out emitter complete and no longer hears how it ends: a provider
 * that refused after the timeout (nothing sent) left the retry a 422 {@code response-not-stored},
 * and the notification was lost for the window (SPEC 1). Each row holds its provider call until the
 * test opens the gate, after the first answer (whatever Spring MVC answers at the timeout).
 *
 * <ul>
 *   <li>the work's own failure ({@code completeWithError} with the provider's refusal): released,
 *       the retry runs it again and sends once;
 *   <li>the same after the application's {@code onTimeout} callback ended the emitter with an error
 *       of its own: an end called from Spring MVC's timeout handling is not the work's, the work's
 *       own end still decides;
 *   <li>a send after the timeout, which fails in the emitter ({@code IllegalStateException}) after
 *       the provider sent, passed to {@code completeWithError}: recorded as answered, the retry
 *       gets 422, never a second send;
 *   <li>a work that sends, then swallows the emitter's failure and never ends it: recorded as
 *       answered once the guard's close grace (6 s here) has nearly passed since the timeout, the
 *       retry gets 422 (409 until then), never a second send.
 * </ul>
 */
@SpringBootTest(
    classes = MvcEmitterTimeoutEndTest.EmitterApp.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
    properties = {
      "idempotency.store=memory",
      "spring.mvc.async.request-timeout=1s",
      // a repeat while the work runs is answered 409 after this wait (the default 2 s only made
      // each refusing row wait); the retries poll every 100 ms
      "idempotency.in-flight-wait=200ms",
      // the bound of the wait for an emitter's end: about 5 s after the timeout, well after each
      // row's repeat (200 ms) and refusal even on a busy machine; the never-ending row waits it
      // out (10 s, with the default in-flight wait, until CI was trimmed: issue 37)
      "idempotency.close-grace-period=6s"
    })
class MvcEmitterTimeoutEndTest {

  private static final HttpClient HTTP =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

  @LocalServerPort int port;
  @Autowired EmitterState state;

  @AfterAll
  static void stopProvider() {
    EmitterController.PROVIDER.shutdownNow();
  }

  @Test
  void anEmitterThatFailsBeforeItSentAfterTheTimeoutIsRunAgainByTheRetry() throws Exception {
    refusedOnceThenRunAgain("refuses");
  }

  @Test
  void anEmitterEndedByItsTimeoutCallbackIsDecidedByItsWork() throws Exception {
    refusedOnceThenRunAgain("ended-on-timeout");
  }

  @Test
  void anEmitterWhoseSendFailsAfterTheTimeoutIsNotRunAgain() throws Exception {
    sentOnceNotRunAgain("send-fails");
  }

  @Test
  void anEmitterThatNeverEndsAfterTheTimeoutIsRecordedWithinTheGrace() throws Exception {
    sentOnceNotRunAgain("never-ends");
  }

  private void refusedOnceThenRunAgain(String kind) throws Exception {
    String key = "\"" + UUID.randomUUID() + "\"";
    int runsBefore = state.runs.get();
    int sendsBefore = state.sends.get();
    int refusedBefore = state.refused.get();
    state.gate = new CountDownLatch(1);
    state.refuseNext = true;
    HttpResponse<byte[]> timedOut;
    HttpResponse<byte[]> whileItRuns;
    try {
      timedOut = post(kind, key);
      whileItRuns = post(kind, key);
    } finally {
      state.gate.countDown();
    }
    assertThat(whileItRuns.statusCode())
        .as("while it runs (first %s): %s", text(timedOut), text(whileItRuns))
        .isEqualTo(409);
    Poll.within(Duration.ofSeconds(30))
        .until("the provider's refusal", () -> state.refused.get() - refusedBefore == 1);

    state.gate = new CountDownLatch(0);
    HttpResponse<byte[]> retry = retryUntilNot409(kind, key);
    String seen = "first " + text(timedOut) + "; retry " + text(retry);
    assertThat(retry.statusCode()).as(seen).isEqualTo(200);
    assertThat(text(retry)).as(seen).contains("sent-");
    assertThat(state.runs.get() - runsBefore).as("handler runs: " + seen).isEqualTo(2);
    assertThat(state.sends.get() - sendsBefore).as("sends: " + seen).isEqualTo(1);
  }

  private void sentOnceNotRunAgain(String kind) throws Exception {
    String key = "\"" + UUID.randomUUID() + "\"";
    int runsBefore = state.runs.get();
    int sendsBefore = state.sends.get();
    int endedBefore = state.workEnded.get();
    state.gate = new CountDownLatch(1);
    state.refuseNext = false;
    HttpResponse<byte[]> timedOut;
    try {
      timedOut = post(kind, key);
    } finally {
      state.gate.countDown();
    }
    Poll.within(Duration.ofSeconds(30))
        .until("the work's end", () -> state.workEnded.get() - endedBefore == 1);

    HttpResponse<byte[]> retry = retryUntilNot409(kind, key);
    String seen = "first " + text(timedOut) + "; retry " + text(retry);
    assertThat(retry.statusCode()).as(seen).isEqualTo(422);
    assertThat(text(retry)).as(seen).contains("response-not-stored");
    assertThat(state.runs.get() - runsBefore).as("handler runs: " + seen).isEqualTo(1);
    assertThat(state.sends.get() - sendsBefore).as("sends: " + seen).isEqualTo(1);
  }

  /** Retries while the key is claimed (409), for at most 30 s. */
  private HttpResponse<byte[]> retryUntilNot409(String kind, String key) throws Exception {
    return Poll.within(Duration.ofSeconds(30))
        .every(Duration.ofMillis(100))
        .until(
            "an answer other than 409",
            () -> post(kind, key),
            response -> response.statusCode() != 409);
  }

  private HttpResponse<byte[]> post(String kind, String key) throws Exception {
    return HTTP.send(
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/timed/emitter/" + kind))
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
  @Import({EmitterController.class, EmitterState.class})
  static class EmitterApp {}

  /** What the emitters' work did (a bean of its own: the guarded controller is a proxy). */
  static class EmitterState {
    final AtomicInteger runs = new AtomicInteger();
    final AtomicInteger sends = new AtomicInteger();
    final AtomicInteger refused = new AtomicInteger();
    final AtomicInteger workEnded = new AtomicInteger();
    volatile boolean refuseNext;
    volatile CountDownLatch gate = new CountDownLatch(0);

    /** The provider, held (at most 30 s) until the gate opens; refuses once if told to. */
    String send(int run) {
      try {
        gate.await(30, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      if (refuseNext) {
        refuseNext = false;
        refused.incrementAndGet();
        throw new IllegalStateException("the provider refused; nothing sent");
      }
      sends.incrementAndGet();
      return "sent-" + run;
    }
  }

  @RestController
  static class EmitterController {
    static final ExecutorService PROVIDER = Executors.newCachedThreadPool();

    private final EmitterState state;

    EmitterController(EmitterState state) {
      this.state = state;
    }

    @PostMapping("/timed/emitter/{kind}")
    @IdempotentEndpoint
    public SseEmitter emitter(@PathVariable String kind) {
      int run = state.runs.incrementAndGet();
      SseEmitter emitter = new SseEmitter();
      if (kind.equals("ended-on-timeout")) {
        emitter.onTimeout(
            () -> emitter.completeWithError(new IllegalStateException("the request timed out")));
      }
      PROVIDER.execute(
          () -> {
            try {
              String id;
              try {
                id = state.send(run);
              } catch (IllegalStateException refused) {
                emitter.completeWithError(refused);
                return;
              }
              try {
                emitter.send(SseEmitter.event().data(id));
                emitter.complete();
              } catch (Exception e) {
                if (!kind.equals("never-ends")) {
                  emitter.completeWithError(e); // the emitter's own failure: it timed out
                }
              }
            } finally {
              state.workEnded.incrementAndGet();
            }
          });
      return emitter;
    }
  }
}
