package dev.idempotency.spring.app;

import dev.idempotency.spring.web.IdempotentEndpoint;
import java.util.Map;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;

/** An endpoint with its own operation name for metrics. */
@RestController
public class NamedEndpointController {

  private final Runs runs;

  public NamedEndpointController(Runs runs) {
    this.runs = runs;
  }

  @PostMapping("/campaigns/{id}/launch")
  @IdempotentEndpoint(name = "campaign-launch")
  public Map<String, Object> launch() {
    return Map.of("launch", "l_" + runs.increment());
  }
}
