package dev.idempotency.reliability.app;

import dev.idempotency.SendContext;
import dev.idempotency.spring.web.IdempotentEndpoint;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RestController;

/**
 * {@code POST /send} (blocking) and {@code POST /send-async} (a {@link CompletableFuture}), each an
 * {@link IdempotentEndpoint} that sends once through {@link ProviderClient}; {@code GET /ready} for
 * the run to see the application up.
 */
@RestController
public class SendController {

  /** The request: the run's key (also sent as {@code Idempotency-Key}) and a recipient. */
  public record SendRequest(String key, String to) {}

  private final ProviderClient provider;
  private final ExecutorService executor = Executors.newFixedThreadPool(16);

  SendController(ProviderClient provider) {
    this.provider = provider;
  }

  /**
   * Sends in the request thread.
   *
   * @param request the request
   * @param context the guarded call
   * @return the provider's message id
   */
  @PostMapping("/send")
  @IdempotentEndpoint
  public Map<String, String> send(@RequestBody SendRequest request, SendContext context) {
    return Map.of("id", provider.send(request.key(), context), "to", request.to());
  }

  /**
   * Sends on another thread; the response is written when the future completes (or, after the
   * container's async timeout, stored for the retry while the client got 409).
   *
   * @param request the request
   * @param context the guarded call
   * @return the provider's message id, later
   */
  @PostMapping("/send-async")
  @IdempotentEndpoint
  public CompletableFuture<Map<String, String>> sendAsync(
      @RequestBody SendRequest request, SendContext context) {
    return CompletableFuture.supplyAsync(
        () -> Map.of("id", provider.send(request.key(), context), "to", request.to()), executor);
  }

  /**
   * Up.
   *
   * @return {@code ok}
   */
  @GetMapping("/ready")
  public String ready() {
    return "ok";
  }
}
