package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.io.InputStream;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.Callable;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.core.Ordered;
import org.springframework.core.annotation.Order;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.servlet.HandlerExceptionResolver;
import org.springframework.web.servlet.ModelAndView;

/**
 * A late failure whose status cannot be resolved after its request ended: the application's own
 * {@code HandlerExceptionResolver} reads the request's body, which on time it can (it answers 422)
 * and after the container async timeout (1 s) it cannot (the request ended, its body is gone: the
 * resolver throws). The send happened, so the call is recorded as answered without its response
 * (SPEC 1): the retry gets {@code 422 response-not-stored}, and the handler runs once.
 */
@SpringBootTest(
    classes = MvcLateUnresolvedFailureTest.ProbeApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class MvcLateUnresolvedFailureTest extends MvcLateFixture {

  @Override
  public int runs() {
    return ProbeController.sends.get();
  }

  /** A 409 that says the key is in progress (not any other 409). */
  @Override
  boolean inProgress(HttpResponse<byte[]> answer) {
    return answer.statusCode() == 409
        && EndpointClient.text(answer).contains("request-in-progress");
  }

  /** The control: on time the resolver answers 422, which is stored and replayed. */
  @Test
  void withoutATimeoutTheResolversAnswerIsStored() throws Exception {
    String key = EndpointClient.newKey();
    int before = ProbeController.sends.get();
    gate.countDown();

    HttpResponse<byte[]> first = post("/probe/unresolved", key, "{}");
    HttpResponse<byte[]> retry = post("/probe/unresolved", key, "{}");

    assertThat(first.statusCode()).as(EndpointClient.text(first)).isEqualTo(422);
    assertThat(EndpointClient.text(first)).startsWith("refused");
    assertThat(retry.statusCode()).isEqualTo(422);
    assertThat(EndpointClient.header(retry, "Idempotent-Replayed")).isEqualTo("true");
    assertThat(ProbeController.sends.get() - before).as("provider sends").isEqualTo(1);
  }

  @Test
  void afterATimeoutAFailureThatCannotBeResolvedIsRecordedAsAnswered() throws Exception {
    String key = EndpointClient.newKey();
    int before = ProbeController.sends.get();

    HttpResponse<byte[]> timedOut = postTimedOut("/probe/unresolved", key);
    HttpResponse<byte[]> retry = retry("/probe/unresolved", key);

    String answers =
        String.format(
            "first %s; retry %s %s",
            timedOut.statusCode(), retry.statusCode(), EndpointClient.text(retry));
    assertThat(timedOut.statusCode()).as(answers).isEqualTo(409);
    assertThat(ProbeController.sends.get() - before)
        .as("provider sends (%s)", answers)
        .isEqualTo(1);
    assertThat(retry.statusCode()).as(answers).isEqualTo(422);
    assertThat(EndpointClient.text(retry)).as(answers).contains("response-not-stored");
  }

  /** The provider accepted the message, then the application refuses the rest. */
  static final class Refused extends RuntimeException {
    private static final long serialVersionUID = 1L;

    Refused() {
      super("refused after the send", null, false, false);
    }
  }

  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ProbeController.class)
  static class ProbeApplication {

    /** Answers {@link Refused} with 422 and the request's body, which it reads. */
    @Bean
    @Order(Ordered.HIGHEST_PRECEDENCE + 1)
    HandlerExceptionResolver refusedResolver() {
      return (HttpServletRequest request,
          HttpServletResponse response,
          Object handler,
          Exception e) -> {
        if (!(e instanceof Refused)) {
          return null;
        }
        try (InputStream body = request.getInputStream()) {
          String text = new String(body.readAllBytes(), StandardCharsets.UTF_8);
          response.setStatus(422);
          response.setContentType("text/plain");
          response.getOutputStream().write(("refused " + text).getBytes(StandardCharsets.UTF_8));
          return new ModelAndView();
        } catch (IOException io) {
          throw new IllegalStateException(io);
        }
      };
    }
  }

  @RestController
  static class ProbeController {
    static final AtomicInteger sends = new AtomicInteger();

    @IdempotentEndpoint
    @PostMapping("/probe/unresolved")
    Callable<String> unresolved(@RequestHeader(name = HOLD, required = false) String hold) {
      return () -> {
        sends.incrementAndGet();
        if (hold != null) {
          awaitGate();
        }
        throw new Refused();
      };
    }
  }
}
