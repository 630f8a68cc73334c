package dev.idempotency.spring.web;

import dev.idempotency.IdempotencyException;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.IdempotencyKeyReuseException;
import dev.idempotency.IdempotencyResultUnavailableException;
import dev.idempotency.KeyStoreException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.jspecify.annotations.Nullable;
import org.springframework.http.HttpStatus;
import org.springframework.http.ProblemDetail;

/**
 * One RFC 9457 problem an {@link IdempotentEndpoint} answers with, the same on Spring MVC and
 * Spring WebFlux: what each refusal says, and its {@code application/problem+json} bytes. Free of
 * either stack's types, so that both endpoints share it.
 *
 * @param status the status
 * @param type the last segment of the problem's type, {@code /problems/<type>}
 * @param detail what went wrong, for the client
 * @param extra further members (numbers or strings), in order
 * @param retryAfter the {@code Retry-After} header's value, or {@code null} for none
 */
record EndpointProblem(
    HttpStatus status,
    String type,
    String detail,
    Map<String, Object> extra,
    @Nullable String retryAfter) {

  EndpointProblem(HttpStatus status, String type, String detail) {
    this(status, type, detail, Map.of(), null);
  }

  /** A required key header is missing. */
  static EndpointProblem missingKey(String headerName) {
    return new EndpointProblem(
        HttpStatus.BAD_REQUEST, "missing-key", "the " + headerName + " header is required");
  }

  /** The request body is larger than the endpoints read for a fingerprint. */
  static EndpointProblem bodyTooLarge(long maxBodyBytes) {
    return new EndpointProblem(
        HttpStatus.PAYLOAD_TOO_LARGE,
        "body-too-large",
        "the request body is larger than " + maxBodyBytes + " bytes");
  }

  /**
   * What a request that was not claimed gets for the guard's refusal, or {@code null} if the error
   * is not one of the guard's refusals (then it is the application's to handle).
   */
  static @Nullable EndpointProblem refusal(Throwable error, String headerName) {
    if (error instanceof IdempotencyInProgressException) {
      return new EndpointProblem(
          HttpStatus.CONFLICT,
          "request-in-progress",
          "a request with this " + headerName + " is still being processed; retry later",
          Map.of(),
          "1");
    } else if (error instanceof IdempotencyKeyReuseException) {
      return new EndpointProblem(
          HttpStatus.UNPROCESSABLE_ENTITY,
          "key-reused",
          "this " + headerName + " was already used with a different request");
    } else if (error instanceof IdempotencyResultUnavailableException) {
      return notStored(headerName, null);
    } else if (error instanceof KeyStoreException) {
      return new EndpointProblem(
          HttpStatus.SERVICE_UNAVAILABLE,
          "store-unavailable",
          "the idempotency store is unavailable; nothing was done",
          Map.of(),
          "5");
    } else if (error instanceof IdempotencyException) {
      return new EndpointProblem(
          HttpStatus.INTERNAL_SERVER_ERROR,
          "idempotency",
          "the first response to this "
              + headerName
              + " cannot be repeated ("
              + error.getClass().getSimpleName()
              + ")");
    }
    return null;
  }

  /**
   * The first request with this key was processed, but its response could not be stored (larger
   * than the capture bound or the store's limit, or a stream cut short): a final, non-retryable
   * answer, so that clients do not retry in a loop; the handler does not run again.
   *
   * @param originalStatus the first response's status, if known
   */
  static EndpointProblem notStored(String headerName, @Nullable Integer originalStatus) {
    String detail =
        "a request with this "
            + headerName
            + " was already processed"
            + (originalStatus != null ? " (status " + originalStatus + ")" : "")
            + ", but its response was not kept (too large to keep, or a stream cut short) and"
            + " cannot be repeated; it is not run again. Look its result up, or send a new"
            + " request with a new key";
    return new EndpointProblem(
        HttpStatus.UNPROCESSABLE_ENTITY,
        "response-not-stored",
        detail,
        originalStatus != null ? Map.of("original-status", originalStatus) : Map.of(),
        null);
  }

  /** The body: RFC 9457 members in a fixed order, then the extra ones. */
  byte[] json() {
    ProblemDetail problem = ProblemDetail.forStatusAndDetail(status, detail);
    problem.setType(URI.create("/problems/" + type));
    StringBuilder body =
        new StringBuilder("{\"type\":")
            .append(quote(problem.getType().toString()))
            .append(",\"title\":")
            .append(quote(String.valueOf(problem.getTitle())))
            .append(",\"status\":")
            .append(problem.getStatus())
            .append(",\"detail\":")
            .append(quote(detail));
    extra.forEach(
        (name, value) ->
            body.append(',')
                .append(quote(name))
                .append(':')
                .append(value instanceof Number ? value.toString() : quote(value.toString())));
    return body.append('}').toString().getBytes(StandardCharsets.UTF_8);
  }

  private static String quote(String text) {
    StringBuilder out = new StringBuilder("\"");
    for (char c : text.toCharArray()) {
      if (c == '"' || c == '\\') {
        out.append('\\').append(c);
      } else if (c < 0x20) {
        out.append(String.format("\\u%04x", (int) c));
      } else {
        out.append(c);
      }
    }
    return out.append('"').toString();
  }
}
