package dev.idempotency.spring.web;

import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.util.Map;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;

/**
 * Writes the RFC 9457 {@code application/problem+json} answers of {@link IdempotentEndpoint} to a
 * servlet response; what they say is {@link EndpointProblem}'s.
 */
final class Problems {

  private Problems() {}

  /**
   * Writes a problem to a response that has nothing written yet.
   *
   * @param type the last segment of the problem's type, {@code /problems/<type>}
   * @param extra further members (numbers or strings), in order
   */
  static void write(
      HttpServletResponse response,
      HttpStatus status,
      String type,
      String detail,
      Map<String, Object> extra)
      throws IOException {
    write(response, new EndpointProblem(status, type, detail, extra, null));
  }

  static void write(HttpServletResponse response, HttpStatus status, String type, String detail)
      throws IOException {
    write(response, status, type, detail, Map.of());
  }

  /** Writes a problem, with its {@code Retry-After} if it has one. */
  static void write(HttpServletResponse response, EndpointProblem problem) throws IOException {
    if (problem.retryAfter() != null) {
      response.setHeader("Retry-After", problem.retryAfter());
    }
    byte[] bytes = problem.json();
    response.setStatus(problem.status().value());
    response.setContentType(MediaType.APPLICATION_PROBLEM_JSON_VALUE);
    response.setContentLength(bytes.length);
    response.getOutputStream().write(bytes);
  }
}
