package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import jakarta.servlet.http.HttpServletRequest;
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
import org.springframework.web.bind.annotation.ResponseStatus;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.bind.annotation.RestControllerAdvice;

/**
 * Probe (probeV) of fb27539, as MvcLateFallbackResolverProbeTest but with no resolver of the
 * application's: the failure's class carries a default status, {@code @ResponseStatus(BAD_GATEWAY)}
 * (a provider's refusal is a 502 wherever nothing better is said), and the API's advice maps it to
 * a kept 422 with the tenant from the query parameter. On time the advice wins (Spring's
 * ExceptionHandlerExceptionResolver comes before its ResponseStatusExceptionResolver): 422 stored
 * and replayed, one send (control). After the container async timeout the advice fails on the ended
 * request (no parameters), Spring swallows that, and ResponseStatusExceptionResolver answers the
 * class's 502: a 5xx, so the key is released and the retry sends again; fb27539's check runs only
 * when no resolver answered. SPEC 1, SPEC 13.
 *
 * <p>Fixed (fixlate2): an {@code @ExceptionHandler} that answers nothing on the ended request
 * leaves the status unknown, whatever a later resolver answers. Since the ended request keeps its
 * parameters, the advice here also reads the session, which the ended request does not keep, so
 * that it still fails late. It was an open finding, medium-high (a second provider send for one
 * key). Main a8f923a, Boot 3.5 and 4.0, in-memory store: fails 2 of 4 on each (Callable and
 * CompletableFuture: 'provider sends for one key (first 409 ... request-in-progress ...; retry 422
 * replayed=null {"error":"recipient-blocked","tenant":"acme"}) expected: 1 but was: 2'); the
 * on-time controls pass.
 */
@SpringBootTest(
    classes = MvcLateResponseStatusProbeTest.ProbeApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
    properties = {
      "idempotency.store=memory",
      "spring.mvc.async.request-timeout=1s",
      "idempotency.close-grace-period=1s"
    })
class MvcLateResponseStatusProbeTest implements EndpointClient {

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

  /** The control: no timeout; the advice's 422 (with the tenant) is stored and replayed. */
  @ParameterizedTest
  @ValueSource(strings = {"callable", "future"})
  void withoutATimeoutTheMappedFailureIsStored(String kind) throws Exception {
    String key = EndpointClient.newKey();
    String path = "/probeV/late-status/" + kind + "?tenant=acme";
    int before = ProbeController.sends.get();
    ProbeController.gate.countDown();

    HttpResponse<byte[]> first = post(path, key, "{}");
    HttpResponse<byte[]> retry = post(path, key, "{}");

    assertThat(first.statusCode()).as(EndpointClient.text(first)).isEqualTo(422);
    assertThat(EndpointClient.text(first)).contains("acme");
    assertThat(retry.statusCode()).as(EndpointClient.text(retry)).isEqualTo(422);
    assertThat(EndpointClient.header(retry, "Idempotent-Replayed")).isEqualTo("true");
    assertThat(ProbeController.sends.get() - before).as("provider sends").isEqualTo(1);
  }

  /** The same failure after the container async timeout answered: one send, never two. */
  @ParameterizedTest
  @ValueSource(strings = {"callable", "future"})
  void afterATimeoutTheFailureIsNotSentAgain(String kind) throws Exception {
    String key = EndpointClient.newKey();
    String path = "/probeV/late-status/" + kind + "?tenant=acme";
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
  }

  /** The provider accepted the message, then the application refuses the rest: mapped to 422. */
  @ResponseStatus(HttpStatus.BAD_GATEWAY)
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
    ResponseEntity<Map<String, String>> blocked(RecipientBlocked e, HttpServletRequest request) {
      return ResponseEntity.status(HttpStatus.UNPROCESSABLE_ENTITY)
          .body(
              Map.of(
                  "error",
                  "recipient-blocked",
                  "tenant",
                  request.getParameter("tenant"),
                  // the ended request keeps the parameters but has no session: late, this
                  // handler fails, as one that reads a session attribute would
                  "session",
                  request.getSession(true).getId()));
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
    @PostMapping("/probeV/late-status/callable")
    Callable<String> callable(@RequestHeader(name = HOLD, required = false) String hold) {
      return () -> send(hold != null);
    }

    @IdempotentEndpoint
    @PostMapping("/probeV/late-status/future")
    CompletableFuture<String> future(@RequestHeader(name = HOLD, required = false) String hold) {
      return CompletableFuture.supplyAsync(() -> send(hold != null), PROVIDER);
    }
  }
}
