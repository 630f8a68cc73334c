package dev.idempotency.spring.fluxapp;

import dev.idempotency.spring.app.Runs;
import dev.idempotency.spring.web.IdempotentEndpoint;
import jakarta.validation.Valid;
import jakarta.validation.constraints.NotBlank;
import java.util.Map;
import org.springframework.http.HttpStatus;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.bind.support.WebExchangeBindException;
import reactor.core.publisher.Mono;

/**
 * {@code AnsweredSignupController} on WebFlux: a binding refusal that the application answers with
 * its own {@code @ExceptionHandler}, which the filter never sees as an error.
 */
@RestController
public class FluxAnsweredSignupController {

  private final Runs runs;

  public FluxAnsweredSignupController(Runs runs) {
    this.runs = runs;
  }

  /** Signs up; an invalid body never reaches it. */
  @PostMapping("/signups/answered")
  @IdempotentEndpoint
  public Mono<ResponseEntity<Map<String, Object>>> signUp(@Valid @RequestBody Signup signup) {
    return Mono.fromSupplier(
        () ->
            ResponseEntity.status(HttpStatus.CREATED)
                .body(
                    Map.<String, Object>of(
                        "signup", "s_" + runs.increment(), "email", signup.email())));
  }

  /** The application's own answer to a body that failed validation. */
  @ExceptionHandler(WebExchangeBindException.class)
  public ResponseEntity<Map<String, Object>> invalid(WebExchangeBindException e) {
    return ResponseEntity.unprocessableEntity().body(Map.of("problem", "invalid sign-up"));
  }

  /** A sign-up request. */
  public record Signup(@NotBlank String email) {}
}
