package dev.idempotency.spring.app;

import dev.idempotency.spring.web.IdempotentEndpoint;
import jakarta.validation.ConstraintViolationException;
import jakarta.validation.constraints.Email;
import java.util.Map;
import org.springframework.http.ResponseEntity;
import org.springframework.validation.annotation.Validated;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;

/**
 * A controller validated by Spring AOP (class-level {@code @Validated}: Boot's {@code
 * MethodValidationPostProcessor} advises it), its refusals answered 400 by its own
 * {@code @ExceptionHandler}: a refused call never reached the method body, so the answer is not
 * stored and a corrected retry under the same key runs (issue 39, the same on WebFlux).
 */
@RestController
@Validated
public class ValidatedNoticeController {

  private final Runs runs;

  public ValidatedNoticeController(Runs runs) {
    this.runs = runs;
  }

  /** Sends a notice; an address that is not an email never reaches it. */
  @PostMapping("/notices/validated")
  @IdempotentEndpoint
  public Map<String, Object> send(@RequestParam @Email String to) {
    return Map.of("notice", "n_" + runs.increment(), "to", to);
  }

  /** The application's own answer to a call the validation proxy refused. */
  @ExceptionHandler(ConstraintViolationException.class)
  public ResponseEntity<Map<String, Object>> invalid(ConstraintViolationException refused) {
    return ResponseEntity.badRequest().body(Map.of("problem", "invalid address"));
  }
}
