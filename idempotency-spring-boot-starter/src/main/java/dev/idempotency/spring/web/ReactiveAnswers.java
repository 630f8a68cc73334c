package dev.idempotency.spring.web;

import java.util.Map;
import java.util.Objects;
import org.jspecify.annotations.Nullable;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpStatusCode;
import org.springframework.http.MediaType;
import org.springframework.http.server.reactive.ServerHttpResponse;
import reactor.core.publisher.Mono;

/**
 * The answers {@link IdempotentEndpointWebFilter} writes itself, the handler not running: a stored
 * response replayed, or a problem.
 */
final class ReactiveAnswers {

  private ReactiveAnswers() {}

  /**
   * Writes {@code stored} to {@code response} byte for byte, marked replayed; a problem where its
   * body was not stored ({@code headerName} names the key header in it).
   */
  static Mono<Void> replay(
      ServerHttpResponse response, @Nullable StoredResponse stored, String headerName) {
    if (stored == null || !stored.bodyStored()) {
      return problem(
          response, EndpointProblem.notStored(headerName, stored != null ? stored.status() : null));
    }
    response.setStatusCode(HttpStatusCode.valueOf(stored.status()));
    HttpHeaders headers = response.getHeaders();
    for (Map.Entry<String, String> header : stored.headers()) {
      headers.add(header.getKey(), header.getValue());
    }
    headers.set(IdempotentEndpointWebFilter.REPLAYED_HEADER, "true");
    byte[] body = Objects.requireNonNull(stored.body());
    headers.setContentLength(body.length);
    return response.writeWith(Mono.fromSupplier(() -> response.bufferFactory().wrap(body)));
  }

  /** Writes {@code problem} to {@code response} as {@code application/problem+json}. */
  static Mono<Void> problem(ServerHttpResponse response, EndpointProblem problem) {
    byte[] bytes = problem.json();
    response.setStatusCode(problem.status());
    HttpHeaders headers = response.getHeaders();
    headers.setContentType(MediaType.APPLICATION_PROBLEM_JSON);
    headers.setContentLength(bytes.length);
    if (problem.retryAfter() != null) {
      headers.set(HttpHeaders.RETRY_AFTER, problem.retryAfter());
    }
    return response.writeWith(Mono.fromSupplier(() -> response.bufferFactory().wrap(bytes)));
  }
}
