package dev.idempotency.examples.webflux;

import java.time.Duration;
import java.util.Map;
import org.springframework.core.env.Environment;
import org.springframework.http.HttpStatusCode;
import org.springframework.http.MediaType;
import org.springframework.stereotype.Component;
import org.springframework.web.reactive.function.client.WebClient;
import reactor.core.publisher.Mono;

/**
 * The SMS provider's client: non-blocking, on Reactor Netty's {@code WebClient}. It passes the
 * idempotency key to the provider, as Twilio-style APIs accept it, and bounds each call.
 */
@Component
public class SmsProviderClient {

  /** The provider refused or failed the message. */
  public static final class ProviderException extends RuntimeException {
    ProviderException(String message) {
      super(message);
    }
  }

  private final WebClient http = WebClient.create();
  private final Environment environment;

  SmsProviderClient(Environment environment) {
    this.environment = environment;
  }

  /**
   * Sends one message.
   *
   * @return the provider's message id
   */
  public Mono<String> send(String to, String text, String idempotencyKey) {
    return http.post()
        .uri(providerUrl())
        .contentType(MediaType.APPLICATION_JSON)
        .header("Idempotency-Key", idempotencyKey)
        .bodyValue(Map.of("to", to, "text", text == null ? "" : text))
        .retrieve()
        .onStatus(
            HttpStatusCode::isError,
            response -> Mono.just(new ProviderException("HTTP " + response.statusCode().value())))
        .bodyToMono(SmsAccepted.class)
        .map(SmsAccepted::id)
        .timeout(Duration.ofSeconds(10));
  }

  /** {@code provider.url}, or this application's own stand-in once its port is known. */
  private String providerUrl() {
    String configured = environment.getProperty("provider.url");
    if (configured != null && !configured.isBlank()) {
      return configured;
    }
    return "http://127.0.0.1:" + environment.getProperty("local.server.port") + "/provider/sms";
  }

  /** The provider's answer. */
  record SmsAccepted(String id) {}
}
