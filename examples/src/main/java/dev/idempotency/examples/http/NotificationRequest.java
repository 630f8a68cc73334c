package dev.idempotency.examples.http;

import java.util.Map;
import java.util.Set;

/**
 * The body of {@code POST /notify}.
 *
 * @param channel {@code sms}, {@code email} or {@code push}
 * @param recipient a phone number, an address or a device token
 * @param template the template's name
 * @param params the template's parameters
 */
public record NotificationRequest(
    String channel, String recipient, String template, Map<String, Object> params) {

  private static final Set<String> CHANNELS = Set.of("sms", "email", "push");

  /**
   * Reads and checks a parsed JSON body.
   *
   * @param json the body as {@link Json#parse} returned it
   * @return the request
   * @throws IllegalArgumentException naming the field that is wrong
   */
  @SuppressWarnings("unchecked")
  public static NotificationRequest from(Object json) {
    if (!(json instanceof Map<?, ?> body)) {
      throw new IllegalArgumentException("the body must be a JSON object");
    }
    String channel = text(body, "channel");
    if (!CHANNELS.contains(channel)) {
      throw new IllegalArgumentException("channel must be one of sms, email, push");
    }
    Object params = body.get("params");
    if (params != null && !(params instanceof Map)) {
      throw new IllegalArgumentException("params must be a JSON object");
    }
    return new NotificationRequest(
        channel,
        text(body, "recipient"),
        text(body, "template"),
        params == null ? Map.of() : (Map<String, Object>) params);
  }

  private static String text(Map<?, ?> body, String field) {
    if (!(body.get(field) instanceof String value) || value.isBlank()) {
      throw new IllegalArgumentException(field + " must be a non-empty string");
    }
    return value;
  }

  /**
   * The message text: the template with its parameters.
   *
   * @return the rendered text
   */
  public String render() {
    return template + " " + Json.canonical(params);
  }
}
