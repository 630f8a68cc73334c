package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.http.HttpResponse;
import java.util.Map;
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
import org.springframework.core.Ordered;
import org.springframework.core.annotation.Order;
import org.springframework.http.HttpStatus;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.bind.annotation.RestControllerAdvice;

/**
 * Probe (probeX) of fixlate2: a failure after the send that comes after the container async timeout
 * (1 s, the client answered 409), mapped to a kept 422 by an {@code @Order(HIGHEST_PRECEDENCE)}
 * {@code @RestControllerAdvice(assignableTypes = ProbeController.class)}, while a catch-all advice
 * of lowest precedence answers any {@code RuntimeException} with 500; thrown as it is ("direct") or
 * as the cause of another exception ("cause", which Spring's resolver matches by its cause).
 * Expected as on time: the 422 is stored and replayed, one send (SPEC 1, 13).
 */
@SpringBootTest(
    classes = MvcLateOrderedAdviceProbeTest.ProbeApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class MvcLateOrderedAdviceProbeTest extends MvcLateFixture {

  @Override
  public int runs() {
    return ProbeController.sends.get();
  }

  @ParameterizedTest
  @ValueSource(strings = {"direct", "cause"})
  void withoutATimeoutThe422IsStored(String kind) throws Exception {
    String key = EndpointClient.newKey();
    String path = "/probe/late-ordered/" + kind;
    int before = ProbeController.sends.get();
    gate.countDown();

    HttpResponse<byte[]> first = post(path, key, "{}");
    HttpResponse<byte[]> retry = post(path, key, "{}");

    assertThat(first.statusCode()).as(EndpointClient.text(first)).isEqualTo(422);
    assertThat(retry.statusCode()).as(EndpointClient.text(retry)).isEqualTo(422);
    assertThat(ProbeController.sends.get() - before).as("provider sends").isEqualTo(1);
  }

  @ParameterizedTest
  @ValueSource(strings = {"direct", "cause"})
  void afterATimeoutThe422IsStoredAndReplayed(String kind) throws Exception {
    String key = EndpointClient.newKey();
    String path = "/probe/late-ordered/" + kind;
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
  @Import({ProbeController.class, ProbeAdvice.class, CatchAllAdvice.class})
  static class ProbeApplication {}

  @Order(Ordered.HIGHEST_PRECEDENCE)
  @RestControllerAdvice(assignableTypes = ProbeController.class)
  static class ProbeAdvice {
    @ExceptionHandler(RecipientBlocked.class)
    ResponseEntity<Map<String, String>> blocked(RecipientBlocked e) {
      return ResponseEntity.status(HttpStatus.UNPROCESSABLE_ENTITY)
          .body(Map.of("error", "recipient-blocked"));
    }
  }

  @Order(Ordered.LOWEST_PRECEDENCE)
  @RestControllerAdvice
  static class CatchAllAdvice {
    @ExceptionHandler(RuntimeException.class)
    ResponseEntity<Map<String, String>> any(RuntimeException e) {
      return ResponseEntity.status(HttpStatus.INTERNAL_SERVER_ERROR)
          .body(Map.of("error", "internal"));
    }
  }

  @RestController
  static class ProbeController {
    static final AtomicInteger sends = new AtomicInteger();
    private static final ExecutorService PROVIDER = Executors.newCachedThreadPool();

    @IdempotentEndpoint
    @PostMapping("/probe/late-ordered/{kind}")
    CompletableFuture<String> send(
        @PathVariable String kind, @RequestHeader(value = HOLD, required = false) String hold) {
      return CompletableFuture.supplyAsync(
          () -> {
            if (hold != null) {
              awaitGate();
            }
            sends.incrementAndGet();
            if (kind.equals("cause")) {
              throw new IllegalStateException(
                  "the send's follow-up failed", new RecipientBlocked());
            }
            throw new RecipientBlocked();
          },
          PROVIDER);
    }
  }
}
