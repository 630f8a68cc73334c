package dev.idempotency.spring.app;

import org.springframework.http.HttpStatus;
import org.springframework.http.ProblemDetail;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.RestControllerAdvice;

/**
 * An application's own mapping of its exceptions to answers, as a {@code @RestControllerAdvice}: a
 * quota refusal is a final 403, a provider outage a 503 that invites a retry. Shared by the Spring
 * MVC and the WebFlux test applications (WebFlux applies a controller advice the same way).
 */
@RestControllerAdvice
public class QuotaAdvice {

  /** The account has used its quota: a final answer. */
  public static class QuotaExceeded extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public QuotaExceeded(String message) {
      super(message);
    }
  }

  /** The provider cannot be reached: try again later. */
  public static class ProviderOutage extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public ProviderOutage(String message) {
      super(message);
    }
  }

  @ExceptionHandler(QuotaExceeded.class)
  public ProblemDetail quotaExceeded(QuotaExceeded exceeded) {
    return ProblemDetail.forStatusAndDetail(HttpStatus.FORBIDDEN, exceeded.getMessage());
  }

  @ExceptionHandler(ProviderOutage.class)
  public ProblemDetail providerOutage(ProviderOutage outage) {
    return ProblemDetail.forStatusAndDetail(HttpStatus.SERVICE_UNAVAILABLE, outage.getMessage());
  }
}
