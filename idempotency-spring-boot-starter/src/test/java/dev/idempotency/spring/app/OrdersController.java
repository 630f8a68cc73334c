package dev.idempotency.spring.app;

import dev.idempotency.spring.web.IdempotentEndpoint;
import jakarta.servlet.http.HttpServletResponse;
import jakarta.validation.Valid;
import jakarta.validation.constraints.NotBlank;
import java.io.IOException;
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
import org.springframework.web.servlet.view.RedirectView;

/**
 * Endpoints that answer the ways Spring applications ordinarily do: redirects, error pages of
 * exceptions and of sendError, binding and validation refusals, "try again" statuses, a large body.
 */
@RestController
public class OrdersController {

  private final Runs runs;

  public OrdersController(Runs runs) {
    this.runs = runs;
  }

  /** POST-redirect-GET: Spring's RedirectView, through sendRedirect (302). */
  @PostMapping("/orders")
  @IdempotentEndpoint
  public RedirectView placeOrder(@RequestBody Map<String, Object> order) {
    return new RedirectView("/orders/o_" + runs.increment());
  }

  /** A 303 with a Location header, written as a plain response. */
  @PostMapping("/orders/see-other")
  @IdempotentEndpoint
  public ResponseEntity<Void> placeOrderSeeOther(@RequestBody Map<String, Object> order) {
    return ResponseEntity.status(HttpStatus.SEE_OTHER)
        .location(URI.create("/orders/o_" + runs.increment()))
        .build();
  }

  /** A ResponseStatusException: Spring answers through sendError and the error page. */
  @PostMapping("/orders/{id}/cancel")
  @IdempotentEndpoint
  public Map<String, Object> cancel(@PathVariable String id) {
    int run = runs.increment();
    throw new ResponseStatusException(
        HttpStatus.NOT_FOUND, "no order " + id + " (run " + run + ")");
  }

  /** An exception with @ResponseStatus: sendError with its reason, then the error page. */
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

  /** The handler calls sendError itself. */
  @PostMapping("/invoices/{id}/pay")
  @IdempotentEndpoint
  public void pay(@PathVariable String id, HttpServletResponse response) throws IOException {
    response.sendError(402, "pay invoice " + id + " first (run " + runs.increment() + ")");
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
  public Map<String, Object> sentThenRefused() {
    throw new ServerWebInputException(
        "the provider rejected the phone number (run " + runs.increment() + ")");
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
  public String report(@RequestParam int bytes) {
    int run = runs.increment();
    String head = "report run " + run + "\n";
    return head + "x".repeat(Math.max(0, bytes - head.length()));
  }

  /** Exceptions that the application's advice maps: over quota (403) or provider down (503). */
  @PostMapping("/messages/{outcome}")
  @IdempotentEndpoint
  public Map<String, Object> message(@PathVariable String outcome) {
    int run = runs.increment();
    if ("over-quota".equals(outcome)) {
      throw new QuotaAdvice.QuotaExceeded("monthly quota used (run " + run + ")");
    }
    throw new QuotaAdvice.ProviderOutage("provider unreachable (run " + run + ")");
  }
}
