package dev.idempotency.spring.fluxapp;

import dev.idempotency.spring.app.QuotaAdvice;
import dev.idempotency.spring.app.Runs;
import dev.idempotency.spring.web.IdempotentEndpoint;
import jakarta.validation.Valid;
import jakarta.validation.constraints.NotBlank;
import java.net.URI;
import java.util.Map;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.ResponseStatus;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.server.ResponseStatusException;
import org.springframework.web.server.ServerWebInputException;
import reactor.core.publisher.Mono;

/**
 * {@code OrdersController}'s endpoints on WebFlux: redirects, errors that WebFlux's {@code
 * WebExceptionHandler}s answer (Boot's error handler), binding and validation refusals, "try again"
 * statuses, a large body.
 */
@RestController
public class FluxOrdersController {

  private final Runs runs;

  public FluxOrdersController(Runs runs) {
    this.runs = runs;
  }

  /** POST-redirect-GET: a 302 with a Location. */
  @PostMapping("/orders")
  @IdempotentEndpoint
  public Mono<ResponseEntity<Void>> placeOrder(@RequestBody Map<String, Object> order) {
    return Mono.fromSupplier(
        () ->
            ResponseEntity.status(HttpStatus.FOUND)
                .location(URI.create("/orders/o_" + runs.increment()))
                .build());
  }

  /** A 303 with a Location header. */
  @PostMapping("/orders/see-other")
  @IdempotentEndpoint
  public ResponseEntity<Void> placeOrderSeeOther(@RequestBody Map<String, Object> order) {
    return ResponseEntity.status(HttpStatus.SEE_OTHER)
        .location(URI.create("/orders/o_" + runs.increment()))
        .build();
  }

  /** A ResponseStatusException: Boot's error handler answers with its JSON error body. */
  @PostMapping("/orders/{id}/cancel")
  @IdempotentEndpoint
  public Mono<Map<String, Object>> cancel(@PathVariable String id) {
    return Mono.fromSupplier(
        () -> {
          int run = runs.increment();
          throw new ResponseStatusException(
              HttpStatus.NOT_FOUND, "no order " + id + " (run " + run + ")");
        });
  }

  /** An exception with @ResponseStatus, thrown by the handler method itself. */
  @PostMapping("/coupons/{code}/redeem")
  @IdempotentEndpoint
  public Map<String, Object> redeem(@PathVariable String code) {
    throw new CouponExpired(code + " (run " + runs.increment() + ")");
  }

  /** What a coupon that expired throws. */
  @ResponseStatus(value = HttpStatus.GONE, reason = "the coupon has expired")
  public static class CouponExpired extends RuntimeException {
    private static final long serialVersionUID = 1L;

    CouponExpired(String message) {
      super(message);
    }
  }

  /**
   * The WebFlux counterpart of {@code sendError}: an error status with a reason, whose page Boot's
   * error handler writes.
   */
  @PostMapping("/invoices/{id}/pay")
  @IdempotentEndpoint
  public Mono<Void> pay(@PathVariable String id) {
    return Mono.error(
        () ->
            new ResponseStatusException(
                HttpStatus.PAYMENT_REQUIRED,
                "pay invoice " + id + " first (run " + runs.increment() + ")"));
  }

  /** A body validated by Spring before the handler runs. */
  @PostMapping("/signups")
  @IdempotentEndpoint
  public ResponseEntity<Map<String, Object>> signUp(@Valid @RequestBody Signup signup) {
    return ResponseEntity.status(HttpStatus.CREATED)
        .body(Map.of("signup", "s_" + runs.increment(), "email", signup.email()));
  }

  /**
   * Sends, then fails with the exception type WebFlux uses for its own input refusals: the handler
   * ran, so its 400 is a final answer (issue 39).
   */
  @PostMapping("/orders/sent-then-refused")
  @IdempotentEndpoint
  public Mono<Map<String, Object>> sentThenRefused() {
    return Mono.fromSupplier(runs::increment)
        .flatMap(
            run ->
                Mono.error(
                    new ServerWebInputException(
                        "the provider rejected the phone number (run " + run + ")")));
  }

  /** A sign-up request. */
  public record Signup(@NotBlank String email) {}

  /** Answers with the status asked for (a "try again" 4xx, say). */
  @PostMapping("/statuses/{status}")
  @IdempotentEndpoint
  public ResponseEntity<Map<String, Object>> status(@PathVariable int status) {
    return ResponseEntity.status(status).body(Map.of("run", runs.increment()));
  }

  /** A text body of the size asked for. */
  @PostMapping(value = "/reports", produces = MediaType.TEXT_PLAIN_VALUE)
  @IdempotentEndpoint
  public Mono<String> report(@RequestParam int bytes) {
    return Mono.fromSupplier(
        () -> {
          int run = runs.increment();
          String head = "report run " + run + "\n";
          return head + "x".repeat(Math.max(0, bytes - head.length()));
        });
  }

  /** Exceptions that the application's advice maps: over quota (403) or provider down (503). */
  @PostMapping("/messages/{outcome}")
  @IdempotentEndpoint
  public Mono<Map<String, Object>> message(@PathVariable String outcome) {
    return Mono.fromSupplier(
        () -> {
          int run = runs.increment();
          if ("over-quota".equals(outcome)) {
            throw new QuotaAdvice.QuotaExceeded("monthly quota used (run " + run + ")");
          }
          throw new QuotaAdvice.ProviderOutage("provider unreachable (run " + run + ")");
        });
  }
}
