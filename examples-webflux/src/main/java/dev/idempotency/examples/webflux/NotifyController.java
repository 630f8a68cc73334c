package dev.idempotency.examples.webflux;

import dev.idempotency.SendContext;
import dev.idempotency.spring.web.IdempotentEndpoint;
import java.util.Map;
import org.springframework.http.HttpStatus;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RestController;
import reactor.core.publisher.Mono;

/**
 * {@code POST /notify} with the {@code Idempotency-Key} header, on WebFlux. {@link
 * IdempotentEndpoint} does all the idempotency: a repeat of the key replays the stored response
 * byte for byte ({@code Idempotent-Replayed: true}), a repeat while the first still sends is 409,
 * the same key with another body 422, a missing key 400, the store unreachable 503, all as {@code
 * application/problem+json}. The handler only sends.
 */
@RestController
public class NotifyController {

  private final SmsProviderClient sms;

  NotifyController(SmsProviderClient sms) {
    this.sms = sms;
  }

  /**
   * Sends one SMS.
   *
   * @param request the notification
   * @param context the idempotent call: its {@link SendContext#providerKey() provider key} goes to
   *     the provider, so that a provider that deduplicates by it absorbs the one send the SDK
   *     cannot rule out (a crash after the provider's accept). Not the client's raw {@code
   *     Idempotency-Key}: the SDK scopes that per caller and endpoint, the provider would not
   * @return {@code 200} with the provider's message id, or {@code 502} if the provider failed (a
   *     5xx releases the key: the client's retry sends)
   */
  @PostMapping("/notify")
  @IdempotentEndpoint
  public Mono<ResponseEntity<Map<String, String>>> notify(
      @RequestBody NotificationRequest request, SendContext context) {
    if (request.recipient() == null || request.recipient().isBlank()) {
      // a 4xx response is stored: the same request with the same key gets the same answer
      return Mono.just(
          ResponseEntity.status(HttpStatus.BAD_REQUEST)
              .body(Map.of("error", "recipient is required")));
    }
    return sms.send(request.recipient(), request.text(), context.providerKey())
        .map(id -> ResponseEntity.ok(Map.of("notification_id", id, "channel", "sms")))
        .onErrorResume(
            SmsProviderClient.ProviderException.class,
            e ->
                Mono.just(
                    ResponseEntity.status(HttpStatus.BAD_GATEWAY)
                        .body(Map.of("error", "the provider failed: " + e.getMessage()))));
  }
}
