package dev.idempotency.spring.web;

import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.IdempotencyKeyReuseException;
import dev.idempotency.KeyStoreException;
import dev.idempotency.spring.InvalidKeyException;
import java.net.URI;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.core.Ordered;
import org.springframework.core.annotation.Order;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.http.ProblemDetail;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.ControllerAdvice;
import org.springframework.web.bind.annotation.ExceptionHandler;

/**
 * Answers the guard's refusals that reach a controller, Spring MVC's or Spring WebFlux's (from an
 * {@code @Idempotent} method it called, or from the guard itself) as the {@link IdempotentEndpoint}
 * answers them, instead of a generic 500:
 *
 * <ul>
 *   <li>{@link InvalidKeyException} (an {@code @Idempotent} call's key is blank, too long, holds
 *       control characters, or is null): {@code 400}, {@code /problems/malformed-key};
 *   <li>{@link IdempotencyKeyReuseException}: {@code 422}, {@code /problems/key-reused};
 *   <li>{@link IdempotencyInProgressException}: {@code 409} with {@code Retry-After: 1}, {@code
 *       /problems/request-in-progress};
 *   <li>{@link KeyStoreException}: {@code 503} with {@code Retry-After: 5}, {@code
 *       /problems/store-unavailable}. Logged at DEBUG only: the guard already logs one WARN per
 *       outage.
 * </ul>
 *
 * Nothing was sent in any of these cases. The details name no key. Ordered last ({@link
 * Ordered#LOWEST_PRECEDENCE}), so an {@code @ExceptionHandler} of the application's own for these
 * types, in a controller or an advice of its own, answers first. Turned off with {@code
 * idempotency.http.problem-details=false}.
 */
@ControllerAdvice
@Order(Ordered.LOWEST_PRECEDENCE)
public class IdempotencyExceptionHandler {

  private static final Logger log = LoggerFactory.getLogger(IdempotencyExceptionHandler.class);

  /** Created by the auto-configuration. */
  public IdempotencyExceptionHandler() {}

  /**
   * A key used again with another request: 422.
   *
   * @param e the refusal
   * @return the problem
   */
  @ExceptionHandler(IdempotencyKeyReuseException.class)
  public ResponseEntity<ProblemDetail> keyReused(IdempotencyKeyReuseException e) {
    return problem(
        HttpStatus.UNPROCESSABLE_ENTITY,
        "key-reused",
        "this idempotency key was already used with a different request; nothing was sent",
        null);
  }

  /**
   * An {@code @Idempotent} call whose key is not a valid key (blank, too long, control characters,
   * or null): 400, as the endpoint answers a malformed key header.
   *
   * @param e the refusal
   * @return the problem
   */
  @ExceptionHandler(InvalidKeyException.class)
  public ResponseEntity<ProblemDetail> invalidKey(InvalidKeyException e) {
    Throwable reason = e.getCause() != null ? e.getCause() : e;
    return problem(
        HttpStatus.BAD_REQUEST,
        "malformed-key",
        "the idempotency key is not a valid key (" + reason.getMessage() + "); nothing was sent",
        null);
  }

  /**
   * A key whose first call is still running: 409, retry in a second.
   *
   * @param e the refusal
   * @return the problem
   */
  @ExceptionHandler(IdempotencyInProgressException.class)
  public ResponseEntity<ProblemDetail> inProgress(IdempotencyInProgressException e) {
    return problem(
        HttpStatus.CONFLICT,
        "request-in-progress",
        "a request with this idempotency key is still being processed; retry later",
        "1");
  }

  /**
   * The store failed or is refused while it fails: 503, retry in five seconds.
   *
   * @param e the failure
   * @return the problem
   */
  @ExceptionHandler(KeyStoreException.class)
  public ResponseEntity<ProblemDetail> storeUnavailable(KeyStoreException e) {
    log.debug("The idempotency store is unavailable; answering 503", e);
    return problem(
        HttpStatus.SERVICE_UNAVAILABLE,
        "store-unavailable",
        "the idempotency store is unavailable; nothing was sent, retry later",
        "5");
  }

  private static ResponseEntity<ProblemDetail> problem(
      HttpStatus status, String type, String detail, @Nullable String retryAfter) {
    ProblemDetail problem = ProblemDetail.forStatusAndDetail(status, detail);
    problem.setType(URI.create("/problems/" + type));
    ResponseEntity.BodyBuilder answer =
        ResponseEntity.status(status).contentType(MediaType.APPLICATION_PROBLEM_JSON);
    if (retryAfter != null) {
      answer.header(HttpHeaders.RETRY_AFTER, retryAfter);
    }
    return answer.body(problem);
  }
}
