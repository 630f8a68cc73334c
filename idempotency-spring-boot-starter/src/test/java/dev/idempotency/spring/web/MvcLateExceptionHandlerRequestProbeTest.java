package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import jakarta.servlet.http.HttpServletRequest;
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
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.bind.annotation.RestControllerAdvice;

/**
 * probeU (fixlate; SPEC 1, SPEC 13): the application's {@code @ExceptionHandler} maps a failure
 * after the send to a kept 422 and reads the request's query parameter ({@code ?tenant=acme}) for
 * its body ({@code Map.of}, which refuses a null). On time: 422 stored, replayed, one send
 * (control, passes). After the container async timeout (1 s, client answered 409), {@code
 * LateResponse} resolves the failure against {@code EndedRequest}, a copy without the query
 * parameters ({@code getParameter} answers null): the {@code @ExceptionHandler} fails, Spring MVC's
 * {@code ExceptionHandlerExceptionResolver} logs "Failure in @ExceptionHandler" and returns null
 * (it never throws), no other resolver maps the failure, {@code renderFailure} answers "nothing
 * maps it" (as for a 500) and the key is released: the client's retry runs the handler and sends
 * again. The starter's "status cannot be known: recorded as answered" rule (UnresolvedFailure) only
 * covers a resolver that throws.
 *
 * <p>Severity medium-high (a second provider send). Fails on main (dc550c5) on Boot 3.5 and 4.0,
 * Callable and CompletableFuture: "provider sends for one key (first 409 ...; retry 422
 * replayed=null {"error":"recipient-blocked","tenant":"acme"}) expected: 1 but was: 2".
 *
 * <p>Fixed: an {@code @ExceptionHandler} declared for the failure (in the controller or an
 * applicable {@code ControllerAdvice}) that answers nothing on the ended request leaves the status
 * unknown ({@code LateResponse.renderFailure}): the call is recorded as answered without its
 * response, and the retry gets 422 {@code response-not-stored}, never a second send.
 */
@SpringBootTest(
    classes = MvcLateExceptionHandlerRequestProbeTest.ProbeApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class MvcLateExceptionHandlerRequestProbeTest extends MvcLateFixture {

  @Override
  public int runs() {
    return ProbeController.sends.get();
  }

  /** The control: no timeout; the advice's 422 (with the tenant) is stored and replayed. */
  @ParameterizedTest
  @ValueSource(strings = {"callable", "future"})
  void withoutATimeoutTheMappedFailureIsStored(String kind) throws Exception {
    String key = EndpointClient.newKey();
    String path = "/probe/late-param/" + kind + "?tenant=acme";
    int before = ProbeController.sends.get();
    gate.countDown();

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
    String path = "/probe/late-param/" + kind + "?tenant=acme";
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
          .body(Map.of("error", "recipient-blocked", "tenant", request.getParameter("tenant")));
    }
  }

  @RestController
  static class ProbeController {
    static final AtomicInteger sends = new AtomicInteger();
    private static final ExecutorService PROVIDER = Executors.newCachedThreadPool();

    /** One provider send, held (bounded) while the request carries {@link #HOLD}. */
    static String send(boolean hold) {
      sends.incrementAndGet();
      if (hold) {
        awaitGate();
      }
      throw new RecipientBlocked();
    }

    @IdempotentEndpoint
    @PostMapping("/probe/late-param/callable")
    Callable<String> callable(@RequestHeader(name = HOLD, required = false) String hold) {
      return () -> send(hold != null);
    }

    @IdempotentEndpoint
    @PostMapping("/probe/late-param/future")
    CompletableFuture<String> future(@RequestHeader(name = HOLD, required = false) String hold) {
      return CompletableFuture.supplyAsync(() -> send(hold != null), PROVIDER);
    }
  }
}
