package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.Serializable;
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
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;

/**
 * Found by probe41 (adversarial review of fix37e, SPEC 1, 13): a Spring MVC
 * {@code @IdempotentEndpoint} that returns a {@code Callable} behind a declared type other than
 * {@code Callable} or {@code Object} ({@code Serializable}). Spring MVC picks its handler by the
 * runtime class and runs it as async work, cancelling it with an interrupt at the container timeout
 * (1 s), while the provider call goes on (until the client has the timeout's answer). The work
 * waits for the provider with an interruptible {@code get()}, as a client would that sends and then
 * fails with the interrupt. The promise: one provider send per key whatever the client's retries.
 * {@code declared-callable} is the same work declared {@code Callable}. Before the fix {@code
 * declared-serializable} was not shielded from the interrupt (the advisor decided by the declared
 * type): answered 500, its key released while the provider call went on, and the retry sent again
 * (2 sends). The context is {@link AsyncShapesTimeoutTest}'s.
 */
@AsyncTimeoutApplicationTest
class SerializableCallableTimeoutTest extends RunningApplication {

  @ParameterizedTest
  @ValueSource(strings = {"declared-callable", "declared-serializable"})
  void aTimedOutCallableSendsOncePerKey(String kind) throws Exception {
    String key = EndpointClient.newKey();
    String path = "/probe41/" + kind;
    int sendsBefore = SerializableController.providerSends.get();

    HttpResponse<byte[]> timedOut =
        SerializableController.FIRST_ANSWER.untilAnswered(() -> post(path, key, "{}"));
    HttpResponse<byte[]> retry;
    long deadline = System.nanoTime() + 15_000_000_000L;
    do {
      retry = post(path, key, "{}");
    } while (retry.statusCode() == 409 && System.nanoTime() < deadline);
    long until = System.nanoTime() + Duration.ofSeconds(10).toNanos();
    while (SerializableController.pending.get() > 0 && System.nanoTime() < until) {
      Thread.sleep(20);
    }

    assertThat(SerializableController.providerSends.get() - sendsBefore)
        .as(
            "provider sends for one key (first answer %s %s, retry %s %s)",
            timedOut.statusCode(),
            EndpointClient.text(timedOut),
            retry.statusCode(),
            EndpointClient.text(retry))
        .isEqualTo(1);
  }

  /**
   * Handlers whose provider call outlives the 1 s timeout: it ends once the test has the answer.
   */
  @RestController
  static class SerializableController {
    static final FirstAnswer FIRST_ANSWER = new FirstAnswer();
    private static final Executor PROVIDER = FIRST_ANSWER.provider();
    static final AtomicInteger providerSends = new AtomicInteger();
    static final AtomicInteger pending = new AtomicInteger();

    /** The work: the provider's send, waited for with an interruptible get(). */
    static ResponseEntity<Map<String, Object>> work(String kind) throws Exception {
      pending.incrementAndGet();
      CompletableFuture<String> sent =
          CompletableFuture.supplyAsync(
              () -> {
                providerSends.incrementAndGet();
                pending.decrementAndGet();
                return kind;
              },
              PROVIDER);
      String id = sent.get(); // an interrupt here fails the work after (or while) it sends
      return ResponseEntity.created(URI.create("/probe41/" + id)).body(Map.of("id", id));
    }

    @PostMapping("/probe41/declared-callable")
    @IdempotentEndpoint
    public Callable<ResponseEntity<Map<String, Object>>> declaredCallable() {
      return () -> work("declared-callable");
    }

    @PostMapping("/probe41/declared-serializable")
    @IdempotentEndpoint
    public Serializable declaredSerializable() {
      return (Callable<ResponseEntity<Map<String, Object>>> & Serializable)
          () -> work("declared-serializable");
    }
  }
}
