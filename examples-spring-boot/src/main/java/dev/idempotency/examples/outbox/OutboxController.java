package dev.idempotency.examples.outbox;

import java.util.Map;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;

/**
 * {@code POST /notify} with an {@code Idempotency-Key} header and {@code {"phone": ..., "text":
 * ...}}: answers {@code {"notification_id": ...}}, the outbox row's id. A repeat while the first is
 * still in its transaction waits for it, up to {@code idempotency.in-flight-wait}, then gets 409;
 * the same key with another body gets 422 (the starter's error handler).
 */
@RestController
public class OutboxController {

  /** The request's body. */
  public record NotifyRequest(String phone, String text) {}

  private final Notifications notifications;

  OutboxController(Notifications notifications) {
    this.notifications = notifications;
  }

  /**
   * Enqueues the SMS.
   *
   * @param key the client's idempotency key
   * @param request the recipient and the message
   * @return {@code notification_id}: the outbox row's id
   */
  @PostMapping("/notify")
  public Map<String, String> notify(
      @RequestHeader("Idempotency-Key") String key, @RequestBody NotifyRequest request) {
    return Map.of("notification_id", notifications.notify(key, request.phone(), request.text()));
  }
}
