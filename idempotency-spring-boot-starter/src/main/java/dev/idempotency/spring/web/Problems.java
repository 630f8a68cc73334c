package dev.idempotency.spring.web;

import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.http.ProblemDetail;

/** The RFC 9457 {@code application/problem+json} answers of {@link IdempotentEndpoint}. */
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
    byte[] bytes = body.append('}').toString().getBytes(StandardCharsets.UTF_8);
    response.setStatus(status.value());
    response.setContentType(MediaType.APPLICATION_PROBLEM_JSON_VALUE);
    response.setContentLength(bytes.length);
    response.getOutputStream().write(bytes);
  }

  static void write(HttpServletResponse response, HttpStatus status, String type, String detail)
      throws IOException {
    write(response, status, type, detail, Map.of());
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
