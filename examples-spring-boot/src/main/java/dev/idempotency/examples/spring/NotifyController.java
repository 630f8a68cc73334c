package dev.idempotency.examples.spring;

import dev.idempotency.SendContext;
import dev.idempotency.examples.http.NotificationRequest;
import dev.idempotency.examples.providers.FakeEmailProvider;
import dev.idempotency.examples.providers.FakeProvider.ProviderException;
import dev.idempotency.examples.providers.FakePushProvider;
import dev.idempotency.examples.providers.FakeSmsProvider;
import dev.idempotency.spring.web.IdempotentEndpoint;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import org.springframework.http.HttpStatus;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.server.ResponseStatusException;

/**
 * {@code POST /notify} with the {@code Idempotency-Key} header: the same service as the JDK
 * example's {@code NotifyHandler}, with {@link IdempotentEndpoint} doing all the idempotency
 * (replays, 409, 422, 400, 503, problem+json) and the handler only sending. It passes the provider
 * key from the {@link SendContext}: the second layer, which absorbs the crash case.
 */
@RestController
public class NotifyController {

  private static final Set<String> CHANNELS = Set.of("sms", "email", "push");

  private final FakeSmsProvider sms;
  private final FakeEmailProvider email;
  private final FakePushProvider push;

  NotifyController(FakeSmsProvider sms, FakeEmailProvider email, FakePushProvider push) {
    this.sms = sms;
    this.email = email;
    this.push = push;
  }

  /**
   * Sends one notification.
   *
   * @param request the notification
   * @param context the idempotent call: provider key, provider UUID, attempt
   * @return {@code 200} with the notification's id, or {@code 502} if the provider failed
   */
  @PostMapping("/notify")
  @IdempotentEndpoint
  public ResponseEntity<Map<String, Object>> notify(
      @RequestBody NotificationRequest request, SendContext context) {
    if (request.channel() == null || !CHANNELS.contains(request.channel())) {
      throw new ResponseStatusException(
          HttpStatus.BAD_REQUEST, "channel must be one of sms, email, push");
    }
    if (request.recipient() == null || request.recipient().isBlank()) {
      throw new ResponseStatusException(HttpStatus.BAD_REQUEST, "recipient is required");
    }
    String id;
    try {
      id =
          switch (request.channel()) {
            case "sms" -> sms.send(request.recipient(), text(request), context.providerKey());
            case "email" ->
                email.send(
                    request.recipient(), request.template(), text(request), context.providerKey());
            default -> push.send(request.recipient(), text(request), context.providerUuid());
          };
    } catch (ProviderException e) {
      // a 5xx: the key is released, so a retry sends (the provider key still deduplicates)
      return ResponseEntity.status(HttpStatus.BAD_GATEWAY)
          .body(Map.of("error", "the provider failed: " + e.getMessage()));
    }
    Map<String, Object> body = new LinkedHashMap<>();
    body.put("notification_id", id);
    body.put("channel", request.channel());
    return ResponseEntity.ok(body);
  }

  private static String text(NotificationRequest request) {
    return request.template() + " " + (request.params() == null ? Map.of() : request.params());
  }
}
