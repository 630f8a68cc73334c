package dev.idempotency.spring.web;

import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.http.HttpStatusCode;
import org.springframework.http.ProblemDetail;
import org.springframework.web.ErrorResponse;
import org.springframework.web.bind.annotation.ResponseStatus;

/**
 * Which answers of an {@link IdempotentEndpoint} are stored (SPEC 13), on Spring MVC and WebFlux
 * alike ({@link ReactiveEndpointCall}), and the status a handler's failure resolves to, as Spring
 * MVC would resolve it: shared by the request's own answer ({@link EndpointCall}) and a timed-out
 * request's late result ({@link AsyncWork}), whose failures the application's exception resolvers
 * resolve ({@link LateResponse#renderFailure}).
 */
final class StoredStatuses {

  private StoredStatuses() {}

  /** 2xx, 3xx and 4xx are final answers, except the 4xx that mean "try again". */
  static boolean isStored(int status) {
    if (status >= 200 && status < 400) {
      return true;
    }
    return status >= 400
        && status < 500
        && status != 408
        && status != 409
        && status != 425
        && status != 429;
  }

  /**
   * The status {@code failure} declares itself, without the application's exception resolvers: an
   * {@link ErrorResponse}'s (a {@code ResponseStatusException}'s), a {@link ResponseStatus} on its
   * class, else 500.
   */
  static int statusOf(Throwable failure) {
    if (failure instanceof ErrorResponse error) {
      return error.getStatusCode().value();
    }
    ResponseStatus annotated =
        AnnotatedElementUtils.findMergedAnnotation(failure.getClass(), ResponseStatus.class);
    return annotated != null ? annotated.code().value() : 500;
  }

  /** The problem detail stored for {@code failure}, resolved to {@code status}. */
  static ProblemDetail problemOf(Throwable failure, int status) {
    if (failure instanceof ErrorResponse error) {
      return error.getBody();
    }
    ResponseStatus annotated =
        AnnotatedElementUtils.findMergedAnnotation(failure.getClass(), ResponseStatus.class);
    String reason = annotated != null && !annotated.reason().isEmpty() ? annotated.reason() : null;
    return ProblemDetail.forStatusAndDetail(HttpStatusCode.valueOf(status), reason);
  }

  /** Why a response was not stored: the key is released with it. */
  static final class NotStored extends RuntimeException {
    private static final long serialVersionUID = 1L;

    NotStored(String why) {
      super(why, null, false, false);
    }
  }
}
