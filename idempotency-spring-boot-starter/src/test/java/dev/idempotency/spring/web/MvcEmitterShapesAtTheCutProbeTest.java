package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.testservers.Poll;
import java.io.IOException;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.annotation.Import;
import org.springframework.http.ResponseEntity;
import org.springframework.http.server.ServerHttpResponse;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.servlet.mvc.method.annotation.ResponseBodyEmitter;
import org.springframework.web.servlet.mvc.method.annotation.SseEmitter;

/**
 * probeU: emitter shapes the fixemit tests do not use, cut short by a container async timeout (1 s)
 * on real Tomcat and a real Redis, each a row of its own key: an {@code SseEmitter} inside a {@code
 * ResponseEntity} with a header, a plain {@code ResponseBodyEmitter} that overrides {@code
 * extendResponse}, a subclass of {@code SseEmitter} with its own fields that overrides {@code send}
 * and {@code completeWithError}, and sends that land around the cut (the provider answers from 0.8
 * to 1.3 s after the handler returned). SPEC 1 for each: the provider's refusal after the cut
 * releases the key and the retry sends once; a send after the cut is kept as answered (422), never
 * sent twice; at the cut, whichever side of it the send lands on, exactly one send per key. All
 * pass on Boot 3.5 and 4.0 (about 17 s a line with Redis and the application starting: extended).
 */
@Tag("extended")
class MvcEmitterShapesAtTheCutProbeTest extends MvcProbeApplication {

  private static final AtomicInteger RUNS = new AtomicInteger();
  private static final Map<String, AtomicInteger> SENDS = new ConcurrentHashMap<>();
  private static final AtomicInteger REFUSED = new AtomicInteger();
  private static final AtomicInteger WORK_ENDED = new AtomicInteger();
  private static volatile boolean refuseNext;
  private static volatile CountDownLatch gate = new CountDownLatch(0);
  private static final ExecutorService PROVIDER = Executors.newCachedThreadPool();

  MvcEmitterShapesAtTheCutProbeTest() {
    super(
        ShapesApp.class,
        "spring.mvc.async.request-timeout=1s",
        "idempotency.close-grace-period=10s");
  }

  @AfterAll
  static void stopProvider() {
    PROVIDER.shutdownNow();
  }

  @Override
  public int runs() {
    return RUNS.get();
  }

  @Test
  void anEntityOfAnEmitterRefusedAfterTheCutIsRunAgainAndSentOnce() throws Exception {
    refusedOnceThenSentOnce("entity");
  }

  @Test
  void aBodyEmitterWithItsOwnResponseRefusedAfterTheCutIsRunAgainAndSentOnce() throws Exception {
    refusedOnceThenSentOnce("body");
  }

  @Test
  void aSubclassOfSseEmitterRefusedAfterTheCutIsRunAgainAndSentOnce() throws Exception {
    refusedOnceThenSentOnce("subclass");
  }

  @Test
  void anEntityOfAnEmitterThatSendsAfterTheCutIsNotSentAgain() throws Exception {
    sentAfterTheCutNotAgain("entity");
  }

  @Test
  void aBodyEmitterThatSendsAfterTheCutIsNotSentAgain() throws Exception {
    sentAfterTheCutNotAgain("body");
  }

  @Test
  void aSubclassOfSseEmitterThatSendsAfterTheCutIsNotSentAgain() throws Exception {
    sentAfterTheCutNotAgain("subclass");
  }

  @Test
  void sendsAroundTheCutAreSentOncePerKey() throws Exception {
    gate = new CountDownLatch(0);
    refuseNext = false;
    List<String> keys = new ArrayList<>();
    List<CompletableFuture<HttpResponse<byte[]>>> firsts = new ArrayList<>();
    for (int i = 0; i < 12; i++) {
      String key = EndpointClient.newKey();
      keys.add(key);
      // 800 to 1300 ms: some before Tomcat's 1 s timeout, some at it, some after
      String path = "/cut/emitter/sse?delay=" + (800 + 45 * i);
      firsts.add(MvcProbes.postAsync(this, path, key));
    }
    List<String> seen = new ArrayList<>();
    for (int i = 0; i < keys.size(); i++) {
      String first = MvcProbes.answerOf(firsts.get(i));
      String key = keys.get(i);
      Poll.within(Duration.ofSeconds(30)).until("key " + i + " sent", () -> sends(key) >= 1);
      HttpResponse<byte[]> retry =
          MvcProbes.retryUntilAnswered(this, "/cut/emitter/sse?delay=0", key);
      seen.add(
          i
              + ": first "
              + first
              + "; retry "
              + MvcProbes.replayed(retry)
              + "; sends "
              + sends(key));
    }
    for (int i = 0; i < keys.size(); i++) {
      assertThat(sends(keys.get(i))).as(String.join("\n", seen)).isEqualTo(1);
    }
  }

  private void refusedOnceThenSentOnce(String kind) throws Exception {
    String key = EndpointClient.newKey();
    String path = "/cut/emitter/" + kind;
    int runsBefore = RUNS.get();
    int refusedBefore = REFUSED.get();
    gate = new CountDownLatch(1);
    refuseNext = true;
    HttpResponse<byte[]> timedOut;
    try {
      timedOut = post(path, key, "{}");
    } finally {
      gate.countDown();
    }
    Poll.within(Duration.ofSeconds(30))
        .until("the provider's refusal", () -> REFUSED.get() - refusedBefore == 1);
    gate = new CountDownLatch(0);
    HttpResponse<byte[]> retry = MvcProbes.retryUntilAnswered(this, path, key);
    String seen = "first " + MvcProbes.replayed(timedOut) + "; retry " + MvcProbes.replayed(retry);
    Poll.within(Duration.ofSeconds(30)).until("the retry's send: " + seen, () -> sends(key) >= 1);
    assertThat(RUNS.get() - runsBefore).as("handler runs: " + seen).isEqualTo(2);
    assertThat(sends(key)).as("sends: " + seen).isEqualTo(1);
  }

  private void sentAfterTheCutNotAgain(String kind) throws Exception {
    String key = EndpointClient.newKey();
    String path = "/cut/emitter/" + kind;
    int runsBefore = RUNS.get();
    int endedBefore = WORK_ENDED.get();
    gate = new CountDownLatch(1);
    refuseNext = false;
    HttpResponse<byte[]> timedOut;
    try {
      timedOut = post(path, key, "{}");
    } finally {
      gate.countDown();
    }
    Poll.within(Duration.ofSeconds(30))
        .until("the work's end", () -> WORK_ENDED.get() - endedBefore >= 1);
    HttpResponse<byte[]> retry = MvcProbes.retryUntilAnswered(this, path, key);
    String seen = "first " + MvcProbes.replayed(timedOut) + "; retry " + MvcProbes.replayed(retry);
    assertThat(retry.statusCode()).as(seen).isEqualTo(422);
    assertThat(RUNS.get() - runsBefore).as("handler runs: " + seen).isEqualTo(1);
    assertThat(sends(key)).as("sends: " + seen).isEqualTo(1);
  }

  private static int sends(String key) {
    AtomicInteger count = SENDS.get(key);
    return count == null ? 0 : count.get();
  }

  /** The provider: held until the gate opens (30 s at most), then sends or refuses once. */
  static String provider(String key, long delayMillis) {
    try {
      gate.await(30, TimeUnit.SECONDS);
      if (delayMillis > 0) {
        Thread.sleep(delayMillis);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    if (refuseNext) {
      refuseNext = false;
      REFUSED.incrementAndGet();
      throw new IllegalStateException("the provider refused; nothing sent");
    }
    int n = SENDS.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
    return "sent-" + n;
  }

  @SpringBootConfiguration
  @EnableAutoConfiguration
  @Import(ShapesController.class)
  static class ShapesApp {}

  /** A plain emitter that sets a header of its own on the response. */
  static final class HeaderBodyEmitter extends ResponseBodyEmitter {
    @Override
    protected void extendResponse(ServerHttpResponse outputMessage) {
      super.extendResponse(outputMessage);
      outputMessage.getHeaders().set("X-Emitter", "body");
    }
  }

  /** A subclass with its own state and overrides of send and completeWithError. */
  static final class CountingSseEmitter extends SseEmitter {
    final AtomicInteger calls = new AtomicInteger();

    @Override
    public void send(SseEventBuilder builder) throws IOException {
      calls.incrementAndGet();
      super.send(builder);
    }

    @Override
    public void completeWithError(Throwable ex) {
      calls.incrementAndGet();
      super.completeWithError(ex);
    }
  }

  @RestController
  static class ShapesController {

    @PostMapping("/cut/emitter/entity")
    @IdempotentEndpoint
    public ResponseEntity<SseEmitter> entity(@RequestHeader("Idempotency-Key") String key) {
      SseEmitter emitter = new SseEmitter();
      start(emitter, key, 0);
      return ResponseEntity.accepted().header("X-Entity", "yes").body(emitter);
    }

    @PostMapping("/cut/emitter/{kind}")
    @IdempotentEndpoint
    public ResponseBodyEmitter emitter(
        @PathVariable String kind,
        @RequestHeader("Idempotency-Key") String key,
        @RequestParam(defaultValue = "0") long delay) {
      ResponseBodyEmitter emitter =
          switch (kind) {
            case "body" -> new HeaderBodyEmitter();
            case "subclass" -> new CountingSseEmitter();
            default -> new SseEmitter();
          };
      start(emitter, key, delay);
      return emitter;
    }

    private static void start(ResponseBodyEmitter emitter, String key, long delay) {
      RUNS.incrementAndGet();
      PROVIDER.execute(
          () -> {
            try {
              String id;
              try {
                id = provider(key, delay);
              } catch (IllegalStateException refused) {
                emitter.completeWithError(refused);
                return;
              }
              try {
                if (emitter instanceof SseEmitter sse) {
                  sse.send(SseEmitter.event().data(id));
                } else {
                  emitter.send(id);
                }
                emitter.complete();
              } catch (Exception e) {
                emitter.completeWithError(e); // the emitter's own failure: it timed out
              }
            } finally {
              WORK_ENDED.incrementAndGet();
            }
          });
    }
  }
}
