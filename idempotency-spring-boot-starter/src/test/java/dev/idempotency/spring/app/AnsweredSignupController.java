package dev.idempotency.spring.app;

import dev.idempotency.spring.web.IdempotentEndpoint;
import jakarta.validation.Valid;
import jakarta.validation.constraints.NotBlank;
import java.util.Map;
import org.springframework.http.HttpStatus;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.MethodArgumentNotValidException;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RestController;

/**
 * A validated body whose refusal the application answers with its own {@code @ExceptionHandler}:
 * the handler method never ran, so the answer is not stored and a corrected retry under the same
 * key runs (issue 39, the same on WebFlux).
 */
@RestController
public class AnsweredSignupController {

  private final Runs runs;

  public AnsweredSignupController(Runs runs) {
    this.runs = runs;
  }

  /** Signs up; an invalid body never reaches it. */
  @PostMapping("/signups/answered")
  @IdempotentEndpoint
  public ResponseEntity<Map<String, Object>> signUp(@Valid @RequestBody Signup signup) {
    return ResponseEntity.status(HttpStatus.CREATED)
        .body(Map.of("signup", "s_" + runs.increment(), "email", signup.email()));
  }

  /** The application's own answer to a body that failed validation. */
  @ExceptionHandler(MethodArgumentNotValidException.class)
  public ResponseEntity<Map<String, Object>> invalid(MethodArgumentNotValidException e) {
    return ResponseEntity.unprocessableEntity().body(Map.of("problem", "invalid sign-up"));
  }

  /** A sign-up request. */
  public record Signup(@NotBlank String email) {}
}
