package dev.idempotency.spring.web;

import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.core.Ordered;
import org.springframework.http.HttpStatus;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.ResponseStatus;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.bind.annotation.RestControllerAdvice;
import org.springframework.web.servlet.HandlerExceptionResolver;
import org.springframework.web.servlet.ModelAndView;

/**
 * The one application of the {@link MvcLateResolutionCases} probes. Each probe's endpoints, {@code
 * /probeV/<scenario>/callable} and {@code /future}, throw a failure of a class of the probe's own,
 * so that only the mapping that probe is about applies to it:
 *
 * <ul>
 *   <li>{@code late-fallback}: {@link FallbackBlocked} (after the send), mapped to 422 by the
 *       advice, which reads the parameter {@code tenant} and the session; a last-resort resolver
 *       (ordered last) answers 500 for it where nothing else did;
 *   <li>{@code late-status}: {@link StatusBlocked} (after the send), {@code @ResponseStatus(502)}
 *       on its class and mapped to 422 by the advice, which reads the tenant and the session;
 *   <li>{@code late-custom}: {@link CustomBlocked} (after the send), mapped to 422 by an
 *       application {@code HandlerExceptionResolver} on requests with a tenant; no advice;
 *   <li>{@code late-unavailable}: {@link ProviderUnavailable} (once, before sending), mapped to 503
 *       by the advice with the tenant; the next call sends.
 * </ul>
 */
@Configuration(proxyBeanMethods = false)
@EnableAutoConfiguration
@Import({
  MvcLateResolutionApplication.ProbeController.class,
  MvcLateResolutionApplication.ProbeAdvice.class
})
class MvcLateResolutionApplication {

  static final String HOLD = "X-Probe-Hold";

  private static final Map<String, AtomicInteger> SENDS = new ConcurrentHashMap<>();

  /** The provider sends of a scenario's endpoints so far. */
  static AtomicInteger sends(String scenario) {
    return SENDS.computeIfAbsent(scenario, s -> new AtomicInteger());
  }

  /** late-fallback's last resort: whatever no other resolver mapped is a 500. */
  @Bean
  HandlerExceptionResolver lastResortResolver() {
    return new LastResort();
  }

  /** late-custom's resolver. */
  @Bean
  HandlerExceptionResolver tenantResolver() {
    return new TenantResolver();
  }

  /** The provider accepted the message, then the application refuses the rest (late-fallback). */
  static final class FallbackBlocked extends RuntimeException {
    private static final long serialVersionUID = 1L;

    FallbackBlocked() {
      super("recipient blocked after the send", null, false, false);
    }
  }

  /** As {@link FallbackBlocked}, with a default status on its class (late-status). */
  @ResponseStatus(HttpStatus.BAD_GATEWAY)
  static final class StatusBlocked extends RuntimeException {
    private static final long serialVersionUID = 1L;

    StatusBlocked() {
      super("recipient blocked after the send", null, false, false);
    }
  }

  /** As {@link FallbackBlocked}, mapped by the application's resolver (late-custom). */
  static final class CustomBlocked extends RuntimeException {
    private static final long serialVersionUID = 1L;

    CustomBlocked() {
      super("recipient blocked after the send", null, false, false);
    }
  }

  /** The provider refused before sending (nothing went out): mapped to 503 (late-unavailable). */
  static final class ProviderUnavailable extends RuntimeException {
    private static final long serialVersionUID = 1L;

    ProviderUnavailable() {
      super("provider unavailable, nothing sent", null, false, false);
    }
  }

  /**
   * Ordered last, as a {@code SimpleMappingExceptionResolver} with a default error view is: answers
   * 500 for late-fallback's failure whatever no other resolver mapped (the other probes' failures
   * are left alone, so that this resolver does not decide them).
   */
  static final class LastResort implements HandlerExceptionResolver, Ordered {
    @Override
    public ModelAndView resolveException(
        HttpServletRequest request, HttpServletResponse response, Object handler, Exception ex) {
      if (!(ex instanceof FallbackBlocked)) {
        return null;
      }
      try {
        response.sendError(HttpStatus.INTERNAL_SERVER_ERROR.value());
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
      return new ModelAndView();
    }

    @Override
    public int getOrder() {
      return Ordered.LOWEST_PRECEDENCE;
    }
  }

  /** Maps late-custom's failure to 422 on a tenant's requests; leaves the others to Spring. */
  static final class TenantResolver implements HandlerExceptionResolver, Ordered {
    @Override
    public ModelAndView resolveException(
        HttpServletRequest request, HttpServletResponse response, Object handler, Exception ex) {
      String tenant = request.getParameter("tenant");
      if (!(ex instanceof CustomBlocked) || tenant == null) {
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

  @RestControllerAdvice
  static class ProbeAdvice {
    @ExceptionHandler(FallbackBlocked.class)
    ResponseEntity<Map<String, String>> fallbackBlocked(
        FallbackBlocked e, HttpServletRequest request) {
      return blocked(request);
    }

    @ExceptionHandler(StatusBlocked.class)
    ResponseEntity<Map<String, String>> statusBlocked(StatusBlocked e, HttpServletRequest request) {
      return blocked(request);
    }

    private static ResponseEntity<Map<String, String>> blocked(HttpServletRequest request) {
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

    @ExceptionHandler(ProviderUnavailable.class)
    ResponseEntity<Map<String, String>> unavailable(
        ProviderUnavailable e, HttpServletRequest request) {
      return ResponseEntity.status(HttpStatus.SERVICE_UNAVAILABLE)
          .body(Map.of("error", "provider-unavailable", "tenant", request.getParameter("tenant")));
    }
  }

  @RestController
  static class ProbeController {
    static volatile CountDownLatch gate = new CountDownLatch(1);

    /** late-unavailable's provider refuses its next call while set (once). */
    static final AtomicBoolean refuseNext = new AtomicBoolean();

    private static final ExecutorService PROVIDER = Executors.newCachedThreadPool();

    /** One provider call, held (bounded) while the request carries {@link #HOLD}. */
    static String send(String scenario, boolean hold) {
      boolean unavailable = scenario.equals("late-unavailable");
      if (!unavailable) {
        sends(scenario).incrementAndGet();
      }
      if (hold) {
        try {
          gate.await(20, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
      switch (scenario) {
        case "late-fallback" -> throw new FallbackBlocked();
        case "late-status" -> throw new StatusBlocked();
        case "late-custom" -> throw new CustomBlocked();
        case "late-unavailable" -> {
          if (refuseNext.compareAndSet(true, false)) {
            throw new ProviderUnavailable();
          }
          return "sent-" + sends(scenario).incrementAndGet();
        }
        default -> throw new IllegalArgumentException("no such probe: " + scenario);
      }
    }

    @IdempotentEndpoint
    @PostMapping("/probeV/{scenario}/callable")
    Callable<String> callable(
        @PathVariable("scenario") String scenario,
        @RequestHeader(name = HOLD, required = false) String hold) {
      return () -> send(scenario, hold != null);
    }

    @IdempotentEndpoint
    @PostMapping("/probeV/{scenario}/future")
    CompletableFuture<String> future(
        @PathVariable("scenario") String scenario,
        @RequestHeader(name = HOLD, required = false) String hold) {
      return CompletableFuture.supplyAsync(() -> send(scenario, hold != null), PROVIDER);
    }
  }
}
