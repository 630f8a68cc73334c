package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.http.HttpResponse;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.http.HttpStatus;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.ResponseStatus;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.bind.annotation.RestControllerAdvice;
import org.springframework.web.context.request.async.WebAsyncTask;

/**
 * probeE: a handler's failure that the application maps to a kept 4xx with its own
 * {@code @ExceptionHandler} (a {@code @RestControllerAdvice}, the usual way), after the provider
 * sent. SPEC 13: "A 5xx (an exception that nothing maps to a 4xx is one) ... releases the key"; a
 * 4xx other than 408/409/425/429 is stored. Without a timeout the failure is answered 422 by the
 * advice and stored: the retry gets it replayed, one send. When the container async timeout (1 s)
 * came first (client answered 409, the key kept), the late failure was resolved by {@code
 * StoredStatuses.statusOf}, which reads only {@code ErrorResponse} and {@code @ResponseStatus}: the
 * advice's mapping was not seen, the failure counted as 500 and the key was released, so the retry
 * ran the handler, and sent, again (9/9 failed, fixlate). Now {@code LateResponse.renderFailure}
 * resolves it with the application's exception resolvers, as on time; the reverse (an annotated 404
 * the advice maps to 503) releases as on time instead of being stored as a 404.
 */
@SpringBootTest(
    classes = MvcLateMappedFailureProbeTest.ProbeApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class MvcLateMappedFailureProbeTest extends MvcLateFixture {

  static final String UNAVAILABLE = "X-Probe-Unavailable";

  @Override
  public int runs() {
    return ProbeController.sends.get();
  }

  /** The control: no timeout; the advice's 422 is stored and replayed, one send. */
  @ParameterizedTest
  @ValueSource(strings = {"callable", "future", "task"})
  void withoutATimeoutTheMappedFailureIsStored(String kind) throws Exception {
    String key = EndpointClient.newKey();
    String path = "/probe/mapped/" + kind;
    int before = ProbeController.sends.get();
    gate.countDown();

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
  @ParameterizedTest
  @ValueSource(strings = {"callable", "future", "task"})
  void afterATimeoutTheMappedFailureIsStoredToo(String kind) throws Exception {
    String key = EndpointClient.newKey();
    String path = "/probe/mapped/" + kind;
    int before = ProbeController.sends.get();

    HttpResponse<byte[]> timedOut = postTimedOut(path, key);
    HttpResponse<byte[]> retry = retry(path, key);

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

  /**
   * The reverse: a failure annotated {@code @ResponseStatus(NOT_FOUND)} that the application's
   * advice maps to 503. On time it is a 503, which releases the key; after a timeout it must be
   * resolved the same way, not by its annotation alone (a stored 404 that the client never would
   * have got): the retry runs the handler again, as it would have without the timeout.
   */
  @ParameterizedTest
  @ValueSource(strings = {"callable", "future", "task"})
  void afterATimeoutAFailureTheAdviceMapsToA5xxReleasesAsOnTime(String kind) throws Exception {
    String key = EndpointClient.newKey();
    String path = "/probe/mapped/" + kind;
    int before = ProbeController.sends.get();

    HttpResponse<byte[]> timedOut = postTimedOut(path, key, UNAVAILABLE, "true");
    HttpResponse<byte[]> retry = retry(path, key, UNAVAILABLE, "true");

    String answers =
        String.format(
            "first %s; retry %s replayed=%s %s",
            timedOut.statusCode(),
            retry.statusCode(),
            EndpointClient.header(retry, "Idempotent-Replayed"),
            EndpointClient.text(retry));
    assertThat(timedOut.statusCode()).as(answers).isEqualTo(409);
    assertThat(retry.statusCode()).as(answers).isEqualTo(503);
    assertThat(EndpointClient.header(retry, "Idempotent-Replayed")).as(answers).isNull();
    assertThat(ProbeController.sends.get() - before).as("handler runs (%s)", answers).isEqualTo(2);
  }

  /** Says it is a 404; the application's advice answers it with 503. */
  @ResponseStatus(HttpStatus.NOT_FOUND)
  static final class ProviderUnavailable extends RuntimeException {
    private static final long serialVersionUID = 1L;

    ProviderUnavailable() {
      super("provider unavailable after the send", null, false, false);
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

    @ExceptionHandler(ProviderUnavailable.class)
    ResponseEntity<Map<String, String>> unavailable(ProviderUnavailable e) {
      return ResponseEntity.status(HttpStatus.SERVICE_UNAVAILABLE)
          .body(Map.of("error", "provider-unavailable"));
    }
  }

  @RestController
  static class ProbeController {
    static final AtomicInteger sends = new AtomicInteger();
    private static final ExecutorService PROVIDER = Executors.newCachedThreadPool();

    /** One provider send, held (bounded) while the request carries {@link #HOLD}. */
    static String send(boolean hold, boolean unavailable) {
      sends.incrementAndGet();
      if (hold) {
        awaitGate();
      }
      if (unavailable) {
        throw new ProviderUnavailable();
      }
      throw new RecipientBlocked();
    }

    @IdempotentEndpoint
    @PostMapping("/probe/mapped/callable")
    Callable<String> callable(
        @RequestHeader(name = HOLD, required = false) String hold,
        @RequestHeader(name = UNAVAILABLE, required = false) String unavailable) {
      return () -> send(hold != null, unavailable != null);
    }

    @IdempotentEndpoint
    @PostMapping("/probe/mapped/future")
    CompletableFuture<String> future(
        @RequestHeader(name = HOLD, required = false) String hold,
        @RequestHeader(name = UNAVAILABLE, required = false) String unavailable) {
      return CompletableFuture.supplyAsync(() -> send(hold != null, unavailable != null), PROVIDER);
    }

    @IdempotentEndpoint
    @PostMapping("/probe/mapped/task")
    WebAsyncTask<String> task(
        @RequestHeader(name = HOLD, required = false) String hold,
        @RequestHeader(name = UNAVAILABLE, required = false) String unavailable) {
      return new WebAsyncTask<>(() -> send(hold != null, unavailable != null));
    }
  }
}
