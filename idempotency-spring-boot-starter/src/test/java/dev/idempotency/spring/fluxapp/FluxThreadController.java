package dev.idempotency.spring.fluxapp;

import dev.idempotency.spring.web.IdempotentEndpoint;
import java.util.Map;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RestController;

/** A guarded handler that answers with the name of the thread its method was invoked on. */
@RestController
public class FluxThreadController {

  @PostMapping("/where")
  @IdempotentEndpoint
  public Map<String, Object> where(@RequestBody Map<String, Object> body) {
    return Map.of("thread", Thread.currentThread().getName());
  }
}
