package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.http.HttpResponse;
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
import org.springframework.http.ProblemDetail;
import org.springframework.web.ErrorResponseException;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.bind.annotation.RestControllerAdvice;
import org.springframework.web.server.ResponseStatusException;

/**
 * Probe (probeX) of fixlate2: a failure after the send that comes after the container async timeout
 * (1 s, the client answered 409), answered with a kept 422 in the shapes Spring 6 offers besides a
 * {@code ResponseEntity}: an {@code @ExceptionHandler} returning a {@code ProblemDetail}, an {@code
 * ErrorResponseException} and a {@code ResponseStatusException} thrown with no advice. Expected as
 * on time: the 422 is stored and replayed, one send (SPEC 1, 13).
 */
@SpringBootTest(
    classes = MvcLateProblemDetailProbeTest.ProbeApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class MvcLateProblemDetailProbeTest extends MvcLateFixture {

  @Override
  public int runs() {
    return ProbeController.sends.get();
  }

  @ParameterizedTest
  @ValueSource(strings = {"problem", "error-response", "response-status"})
  void afterATimeoutTheKept422IsStoredAndReplayed(String kind) throws Exception {
    String key = EndpointClient.newKey();
    String path = "/probe/late-problem/" + kind;
    int before = ProbeController.sends.get();

    HttpResponse<byte[]> timedOut = postTimedOut(path, key);
    HttpResponse<byte[]> retry = retry(path, key);

    String answers =
        String.format(
            "first %s; retry %s replayed=%s %s",
            timedOut.statusCode(),
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

  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import({ProbeController.class, ProbeAdvice.class})
  static class ProbeApplication {}

  @RestControllerAdvice
  static class ProbeAdvice {
    @ExceptionHandler(RecipientBlocked.class)
    ProblemDetail blocked(RecipientBlocked e) {
      return ProblemDetail.forStatusAndDetail(HttpStatus.UNPROCESSABLE_ENTITY, "recipient-blocked");
    }
  }

  @RestController
  static class ProbeController {
    static final AtomicInteger sends = new AtomicInteger();
    private static final ExecutorService PROVIDER = Executors.newCachedThreadPool();

    @IdempotentEndpoint
    @PostMapping("/probe/late-problem/{kind}")
    CompletableFuture<String> send(
        @PathVariable String kind,
        @org.springframework.web.bind.annotation.RequestHeader(value = HOLD, required = false)
            String hold) {
      return CompletableFuture.supplyAsync(
          () -> {
            if (hold != null) {
              awaitGate();
            }
            sends.incrementAndGet();
            switch (kind) {
              case "problem":
                throw new RecipientBlocked();
              case "error-response":
                throw new ErrorResponseException(HttpStatus.UNPROCESSABLE_ENTITY);
              default:
                throw new ResponseStatusException(HttpStatus.UNPROCESSABLE_ENTITY, "blocked");
            }
          },
          PROVIDER);
    }
  }
}
