package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.http.HttpStatus;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.bind.annotation.RestControllerAdvice;
import org.springframework.web.context.request.async.WebAsyncTask;

/**
 * probeE: a handler's failure that the application maps to a kept 4xx with its own
 * {@code @ExceptionHandler} (a {@code @RestControllerAdvice}, the usual way), after the provider
 * sent. SPEC 13: "A 5xx (an exception that nothing maps to a 4xx is one) ... releases the key"; a
 * 4xx other than 408/409/425/429 is stored. Without a timeout the failure is answered 422 by the
 * advice and stored: the retry gets it replayed, one send. When the container async timeout (1 s)
 * came first (client answered 409, the key kept), the late failure is resolved by {@code
 * StoredStatuses.statusOf}, which reads only {@code ErrorResponse} and {@code @ResponseStatus}: the
 * advice's mapping is not seen, the failure counts as 500 and the key is released, so the retry
 * runs the handler, and sends, again.
 */
@SpringBootTest(
    classes = MvcLateMappedFailureProbeTest.ProbeApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
    properties = {
      "idempotency.store=memory",
      "spring.mvc.async.request-timeout=1s",
      "idempotency.close-grace-period=1s"
    })
class MvcLateMappedFailureProbeTest implements EndpointClient {

  static final String HOLD = "X-Probe-Hold";

  @LocalServerPort int port;

  @Override
  public int port() {
    return port;
  }

  @Override
  public int runs() {
    return ProbeController.sends.get();
  }

  @BeforeEach
  void reset() {
    ProbeController.gate = new CountDownLatch(1);
  }

  /** The control: no timeout; the advice's 422 is stored and replayed, one send. */
  @ParameterizedTest
  @ValueSource(strings = {"callable", "future", "task"})
  void withoutATimeoutTheMappedFailureIsStored(String kind) throws Exception {
    String key = EndpointClient.newKey();
    String path = "/probe/mapped/" + kind;
    int before = ProbeController.sends.get();
    ProbeController.gate.countDown();

    HttpResponse<byte[]> first = post(path, key, "{}");
    HttpResponse<byte[]> retry = post(path, key, "{}");

    assertThat(first.statusCode()).as(EndpointClient.text(first)).isEqualTo(422);
    assertThat(retry.statusCode()).as(EndpointClient.text(retry)).isEqualTo(422);
    assertThat(EndpointClient.header(retry, "Idempotent-Replayed")).isEqualTo("true");
    assertThat(ProbeController.sends.get() - before).as("provider sends").isEqualTo(1);
  }

  /**
   * The same failure after the container async timeout answered: expected the same stored 422 and
   * one send.
   */
  @org.junit.jupiter.api.Tag("open-finding")
  @ParameterizedTest
  @ValueSource(strings = {"callable", "future", "task"})
  void afterATimeoutTheMappedFailureIsStoredToo(String kind) throws Exception {
    String key = EndpointClient.newKey();
    String path = "/probe/mapped/" + kind;
    int before = ProbeController.sends.get();

    HttpResponse<byte[]> timedOut;
    try {
      timedOut = post(path, key, "{}", HOLD, "true");
    } finally {
      ProbeController.gate.countDown();
    }
    HttpResponse<byte[]> retry;
    long deadline = System.nanoTime() + Duration.ofSeconds(15).toNanos();
    do {
      retry = post(path, key, "{}");
    } while (retry.statusCode() == 409 && System.nanoTime() < deadline);

    String answers =
        String.format(
            "first %s %s; retry %s replayed=%s %s",
            timedOut.statusCode(),
            EndpointClient.text(timedOut),
            retry.statusCode(),
            EndpointClient.header(retry, "Idempotent-Replayed"),
            EndpointClient.text(retry));
    assertThat(timedOut.statusCode()).as(answers).isEqualTo(409);
    assertThat(ProbeController.sends.get() - before)
        .as("provider sends for one key (%s)", answers)
        .isEqualTo(1);
    assertThat(retry.statusCode()).as(answers).isEqualTo(422);
    assertThat(EndpointClient.header(retry, "Idempotent-Replayed")).as(answers).isEqualTo("true");
  }

  /** The provider accepted the message, then the application refuses the rest: mapped to 422. */
  static final class RecipientBlocked extends RuntimeException {
    private static final long serialVersionUID = 1L;

    RecipientBlocked() {
      super("recipient blocked after the send", null, false, false);
    }
  }

  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import({ProbeController.class, ProbeAdvice.class})
  static class ProbeApplication {}

  @RestControllerAdvice
  static class ProbeAdvice {
    @ExceptionHandler(RecipientBlocked.class)
    ResponseEntity<Map<String, String>> blocked(RecipientBlocked e) {
      return ResponseEntity.status(HttpStatus.UNPROCESSABLE_ENTITY)
          .body(Map.of("error", "recipient-blocked"));
    }
  }

  @RestController
  static class ProbeController {
    static final AtomicInteger sends = new AtomicInteger();
    static volatile CountDownLatch gate = new CountDownLatch(1);
    private static final ExecutorService PROVIDER = Executors.newCachedThreadPool();

    /** One provider send, held (bounded) while the request carries {@link #HOLD}. */
    static String send(boolean hold) {
      sends.incrementAndGet();
      if (hold) {
        try {
          gate.await(20, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
      throw new RecipientBlocked();
    }

    @IdempotentEndpoint
    @PostMapping("/probe/mapped/callable")
    Callable<String> callable(@RequestHeader(name = HOLD, required = false) String hold) {
      return () -> send(hold != null);
    }

    @IdempotentEndpoint
    @PostMapping("/probe/mapped/future")
    CompletableFuture<String> future(@RequestHeader(name = HOLD, required = false) String hold) {
      return CompletableFuture.supplyAsync(() -> send(hold != null), PROVIDER);
    }

    @IdempotentEndpoint
    @PostMapping("/probe/mapped/task")
    WebAsyncTask<String> task(@RequestHeader(name = HOLD, required = false) String hold) {
      return new WebAsyncTask<>(() -> send(hold != null));
    }
  }
}
