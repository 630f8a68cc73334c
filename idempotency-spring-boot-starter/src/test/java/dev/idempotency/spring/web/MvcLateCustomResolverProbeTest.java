package dev.idempotency.spring.web;

import static org.assertj.core.api.Assertions.assertThat;

import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.http.HttpResponse;
import java.time.Duration;
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
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.core.Ordered;
import org.springframework.http.HttpStatus;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.servlet.HandlerExceptionResolver;
import org.springframework.web.servlet.ModelAndView;

/**
 * Probe (probeV) of fb27539: the same hazard as probeU's MvcLateExceptionHandlerRequestProbeTest,
 * with the application's own {@code HandlerExceptionResolver} bean in place of an {@code
 * ExceptionHandler}. The resolver maps a failure after the send to a kept 422 for the requests of a
 * tenant ({@code ?tenant=acme}) and leaves the others (null) to the next resolver. On time: 422
 * stored and replayed, one send (control). After the container async timeout (1 s, client answered
 * 409) {@code LateResponse} resolves the failure against the ended request, which has no
 * parameters: the resolver answers null, no {@code @ExceptionHandler} is declared for the failure,
 * so fb27539's check does not apply, {@code renderFailure} answers "nothing maps it" (a 500) and
 * the key is released: the retry sends again. SPEC 1, SPEC 13.
 *
 * <p>Fixed (fixlate2): the ended request keeps the request's parameters. It was an open finding,
 * medium (a second provider send for one key; an application resolver that depends on request
 * parameters is less common than an {@code @ExceptionHandler}). Main a8f923a, Boot 3.5 and 4.0,
 * in-memory store: fails 2 of 4 on each (Callable and CompletableFuture: 'provider sends for one
 * key (first 409 ... request-in-progress ...; retry 422 replayed=null
 * {"error":"recipient-blocked","tenant":"acme"}) expected: 1 but was: 2'); the on-time controls
 * pass.
 */
@SpringBootTest(
    classes = MvcLateCustomResolverProbeTest.ProbeApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
    properties = {
      "idempotency.store=memory",
      "spring.mvc.async.request-timeout=1s",
      "idempotency.close-grace-period=1s"
    })
class MvcLateCustomResolverProbeTest implements EndpointClient {

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
    String path = "/probeV/late-custom/" + kind + "?tenant=acme";
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
    String path = "/probeV/late-custom/" + kind + "?tenant=acme";
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
  static final class RecipientBlocked extends RuntimeException {
    private static final long serialVersionUID = 1L;

    RecipientBlocked() {
      super("recipient blocked after the send", null, false, false);
    }
  }

  @Configuration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ProbeController.class)
  static class ProbeApplication {

    @Bean
    HandlerExceptionResolver tenantResolver() {
      return new TenantResolver();
    }
  }

  /** Maps a blocked recipient to 422 on a tenant's requests; leaves the others to Spring. */
  static final class TenantResolver implements HandlerExceptionResolver, Ordered {
    @Override
    public ModelAndView resolveException(
        HttpServletRequest request, HttpServletResponse response, Object handler, Exception ex) {
      String tenant = request.getParameter("tenant");
      if (!(ex instanceof RecipientBlocked) || tenant == null) {
        return null;
      }
      try {
        response.setStatus(HttpStatus.UNPROCESSABLE_ENTITY.value());
        response.setContentType("application/json");
        response
            .getWriter()
            .write("{\"error\":\"recipient-blocked\",\"tenant\":\"" + tenant + "\"}");
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
      return new ModelAndView();
    }

    @Override
    public int getOrder() {
      return Ordered.HIGHEST_PRECEDENCE + 10;
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
    @PostMapping("/probeV/late-custom/callable")
    Callable<String> callable(@RequestHeader(name = HOLD, required = false) String hold) {
      return () -> send(hold != null);
    }

    @IdempotentEndpoint
    @PostMapping("/probeV/late-custom/future")
    CompletableFuture<String> future(@RequestHeader(name = HOLD, required = false) String hold) {
      return CompletableFuture.supplyAsync(() -> send(hold != null), PROVIDER);
    }
  }
}
