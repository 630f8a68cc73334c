package dev.idempotency.spring.fluxapp;

import dev.idempotency.spring.app.Runs;
import dev.idempotency.spring.web.IdempotentEndpoint;
import java.net.URI;
import java.util.Map;
import org.springframework.http.HttpStatus;
import org.springframework.http.ResponseEntity;
import org.springframework.http.server.reactive.ServerHttpResponse;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.ResponseStatus;
import org.springframework.web.bind.annotation.RestController;
import reactor.core.publisher.Mono;

/**
 * WebFlux handlers that answer without a body, the usual shape of a "202 Accepted" send endpoint:
 * each shape takes another way through WebFlux (some never write the response at all, and WebFlux
 * completes it after the filter chain).
 */
@RestController
public class FluxNoBodyController {

  private final Runs runs;

  public FluxNoBodyController(Runs runs) {
    this.runs = runs;
  }

  /** {@code @ResponseStatus} and a {@code Mono<Void>}. */
  @PostMapping("/accepted/mono-void")
  @ResponseStatus(HttpStatus.ACCEPTED)
  @IdempotentEndpoint
  public Mono<Void> monoOfVoid() {
    return Mono.fromRunnable(runs::increment);
  }

  /** {@code @ResponseStatus} and a {@code void} method. */
  @PostMapping("/accepted/void")
  @ResponseStatus(HttpStatus.ACCEPTED)
  @IdempotentEndpoint
  public void plainVoid() {
    runs.increment();
  }

  /** A {@code ResponseEntity<Void>} with a Location and a listed header. */
  @PostMapping("/accepted/entity")
  @IdempotentEndpoint(headers = "X-Notification-Id")
  public Mono<ResponseEntity<Void>> entity() {
    return Mono.fromSupplier(
        () -> {
          String id = "n_" + runs.increment();
          return ResponseEntity.accepted()
              .location(URI.create("/notifications/" + id))
              .header("X-Notification-Id", id)
              .build();
        });
  }

  /** {@code @ResponseStatus} and a {@code Mono} of a value that completes empty. */
  @PostMapping("/accepted/empty")
  @ResponseStatus(HttpStatus.ACCEPTED)
  @IdempotentEndpoint
  public Mono<Map<String, Object>> empty() {
    return Mono.fromRunnable(runs::increment);
  }

  /** The status and headers set on the {@code ServerHttpResponse} parameter, nothing written. */
  @PostMapping("/accepted/response-parameter")
  @IdempotentEndpoint(headers = "X-Notification-Id")
  public Mono<Void> responseParameter(ServerHttpResponse response) {
    return Mono.fromRunnable(
        () -> {
          String id = "n_" + runs.increment();
          response.setStatusCode(HttpStatus.ACCEPTED);
          response.getHeaders().setLocation(URI.create("/notifications/" + id));
          response.getHeaders().set("X-Notification-Id", id);
        });
  }

  /** {@code @ResponseStatus(NO_CONTENT)} and a {@code Mono<Void>}. */
  @PostMapping("/accepted/no-content")
  @ResponseStatus(HttpStatus.NO_CONTENT)
  @IdempotentEndpoint
  public Mono<Void> noContent() {
    return Mono.fromRunnable(runs::increment);
  }
}
