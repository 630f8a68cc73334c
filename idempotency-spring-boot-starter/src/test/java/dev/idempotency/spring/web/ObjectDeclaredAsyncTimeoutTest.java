package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.context.request.async.DeferredResult;
import org.springframework.web.servlet.mvc.method.annotation.ResponseBodyEmitter;
import reactor.core.publisher.Mono;

/**
 * Found by the probefinal re-probe of ade0bfe (the return types refused at start): a Spring MVC
 * {@code @IdempotentEndpoint} declared to return {@code Object} (or a type variable) passes the
 * start checks whatever it returns at runtime, and Spring MVC picks its return value handler by the
 * runtime type; before the fix a {@code DeferredResult} or a {@code Mono} returned so, and a
 * declared {@code ResponseBodyEmitter}, were answered 503 at a timeout with their key released
 * while the send ran, and the retry sent again. A container timeout (1 s) while the provider call
 * runs must keep the key claimed and the retry must get the stored response: one provider send per
 * key (SPEC 1, 13, 16), as {@link AsyncTimeoutEndpointTest} shows for the declared types. The
 * provider call ends only once the first answer (the timeout's) is in, or after 30 s: Tomcat checks
 * async timeouts about once a second, so a fixed 2 s call could end before a late timeout.
 */
@AsyncTimeoutApplicationTest
class ObjectDeclaredAsyncTimeoutTest extends RunningApplication {

  @ParameterizedTest
  @ValueSource(strings = {"future", "callable", "deferred", "mono"})
  void aTimedOutObjectDeclaredHandlerSendsOncePerKey(String kind) throws Exception {
    String key = EndpointClient.newKey();
    String path = "/probe/object/" + kind;
    int sendsBefore = ObjectDeclaredController.providerSends.get();

    HttpResponse<byte[]> timedOut =
        ObjectDeclaredController.untilAnswered(() -> post(path, key, "{}"));
    HttpResponse<byte[]> retry = MvcProbes.retryWhileInProgress(this, path, key);
    // the first request's send, if its key was released, still ends: wait for it (bounded)
    long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
    while (ObjectDeclaredController.pending.get() > 0 && System.nanoTime() < deadline) {
      Thread.sleep(20);
    }

    assertThat(ObjectDeclaredController.providerSends.get() - sendsBefore)
        .as(
            "provider sends for one key (first answer %s, retry %s)",
            timedOut.statusCode(), retry.statusCode())
        .isEqualTo(1);
    assertThat(timedOut.statusCode()).as(EndpointClient.text(timedOut)).isEqualTo(409);
    assertThat(retry.statusCode()).as(EndpointClient.text(retry)).isEqualTo(201);
    assertThat(EndpointClient.header(retry, "Idempotent-Replayed")).isEqualTo("true");
  }

  /**
   * The same promise for shapes the start checks do not look at: a handler declared to return a
   * {@code ResponseBodyEmitter} (streamed by the provider's answer), and a generic method {@code
   * <T> T} (erased to {@code Object}) returning a {@code DeferredResult}.
   */
  @ParameterizedTest
  @ValueSource(strings = {"/probe/emitter", "/probe/generic/deferred"})
  void aTimedOutEmitterOrGenericHandlerSendsOncePerKey(String path) throws Exception {
    String key = EndpointClient.newKey();
    int sendsBefore = ObjectDeclaredController.providerSends.get();

    HttpResponse<byte[]> timedOut =
        ObjectDeclaredController.untilAnswered(() -> post(path, key, "{}"));
    HttpResponse<byte[]> retry = MvcProbes.retryWhileInProgress(this, path, key);
    long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
    while (ObjectDeclaredController.pending.get() > 0 && System.nanoTime() < deadline) {
      Thread.sleep(20);
    }

    assertThat(ObjectDeclaredController.providerSends.get() - sendsBefore)
        .as(
            "provider sends for one key (first answer %s, retry %s)",
            timedOut.statusCode(), retry.statusCode())
        .isEqualTo(1);
  }

  /** Retries (bounded, 15 s) while the first request's work runs; the first other answer. */

  /**
   * Handlers declared {@code Object} whose provider call outlives the 1 s timeout: it ends once the
   * test has the first answer, or after 30 s.
   */
  @RestController
  static class ObjectDeclaredController {
    private static final FirstAnswer FIRST_ANSWER = new FirstAnswer();
    private static final Executor PROVIDER = FIRST_ANSWER.provider();
    // static: the controller is proxied (CGLIB), its fields are not read through the proxy
    static final AtomicInteger providerSends = new AtomicInteger();
    static final AtomicInteger pending = new AtomicInteger();
    private static final AtomicInteger runs = new AtomicInteger();

    /** The request's answer; the provider calls it started end once it is in (at most 30 s). */
    static <T> T untilAnswered(Callable<T> request) throws Exception {
      return FIRST_ANSWER.untilAnswered(request);
    }

    private ResponseEntity<Map<String, Object>> sent(String kind, int run) {
      providerSends.incrementAndGet();
      pending.decrementAndGet();
      String id = kind + "_" + run;
      return ResponseEntity.created(URI.create("/probe/" + id)).body(Map.of("id", id));
    }

    @PostMapping("/probe/object/{kind}")
    @IdempotentEndpoint
    public Object handle(@PathVariable String kind) {
      int run = runs.incrementAndGet();
      pending.incrementAndGet();
      switch (kind) {
        case "future":
          return CompletableFuture.supplyAsync(() -> sent(kind, run), PROVIDER);
        case "callable":
          Callable<ResponseEntity<Map<String, Object>>> callable =
              () -> CompletableFuture.supplyAsync(() -> sent(kind, run), PROVIDER).join();
          return callable;
        case "deferred":
          DeferredResult<ResponseEntity<Map<String, Object>>> result = new DeferredResult<>();
          PROVIDER.execute(() -> result.setResult(sent(kind, run)));
          return result;
        default:
          // the provider call is under way whatever happens to the Mono (no cancel reaches it)
          return Mono.fromFuture(
              CompletableFuture.supplyAsync(() -> sent(kind, run), PROVIDER), true);
      }
    }

    @PostMapping("/probe/emitter")
    @IdempotentEndpoint
    public ResponseBodyEmitter emitter() {
      int run = runs.incrementAndGet();
      pending.incrementAndGet();
      ResponseBodyEmitter emitter = new ResponseBodyEmitter();
      PROVIDER.execute(
          () -> {
            ResponseEntity<Map<String, Object>> answer = sent("emitter", run);
            try {
              emitter.send(answer.getBody(), MediaType.APPLICATION_JSON);
              emitter.complete();
            } catch (IOException | IllegalStateException timedOutAlready) {
              // the request ended at its timeout: the send happened all the same
            }
          });
      return emitter;
    }

    @PostMapping("/probe/generic/deferred")
    @IdempotentEndpoint
    @SuppressWarnings("unchecked")
    public <T> T genericDeferred() {
      int run = runs.incrementAndGet();
      pending.incrementAndGet();
      DeferredResult<ResponseEntity<Map<String, Object>>> result = new DeferredResult<>();
      PROVIDER.execute(() -> result.setResult(sent("generic-deferred", run)));
      return (T) result;
    }
  }
}
