package dev.idempotency.examples.http;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * An RFC 9457 problem detail, written as {@code application/problem+json}.
 *
 * @param status the HTTP status
 * @param type a URI naming the problem type
 * @param title a short summary
 * @param detail what happened in this case
 */
public record Problem(int status, String type, String title, String detail) {

  /**
   * The JSON body.
   *
   * @return the problem as JSON
   */
  public String json() {
    Map<String, Object> body = new LinkedHashMap<>();
    body.put("type", type);
    body.put("title", title);
    body.put("status", status);
    body.put("detail", detail);
    return Json.write(body);
  }
}
