package dev.idempotency.spring.app;

import dev.idempotency.SendContext;
import dev.idempotency.spring.web.IdempotentEndpoint;
import java.net.URI;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RestController;

/** Endpoints with @IdempotentEndpoint, counting how often each handler really ran. */
@RestController
public class NotifyController {

  private final Runs runs;
  private final AtomicReference<CountDownLatch> gate = new AtomicReference<>();
  private final AtomicReference<CountDownLatch> entered =
      new AtomicReference<>(new CountDownLatch(1));

  public NotifyController(Runs runs) {
    this.runs = runs;
  }

  /** How often the handlers (of every test controller) really ran. */
  public int runs() {
    return runs.get();
  }

  /** Makes the next handler runs wait for the latch (a slow provider); null to run at once. */
  public void gate(CountDownLatch latch) {
    entered.set(new CountDownLatch(1));
    gate.set(latch);
  }

  /** Waits (bounded) until a handler run is waiting at the gate. */
  public boolean awaitAtTheGate() throws InterruptedException {
    return entered.get().await(30, TimeUnit.SECONDS);
  }

  @PostMapping("/notify")
  @IdempotentEndpoint(headers = "X-Notification-Id")
  public ResponseEntity<Map<String, Object>> notify(
      @RequestBody Map<String, Object> body, SendContext context) throws InterruptedException {
    CountDownLatch latch = gate.get();
    if (latch != null) {
      entered.get().countDown();
      latch.await(30, TimeUnit.SECONDS);
    }
    int run = runs.increment();
    if ("invalid".equals(body.get("recipient"))) {
      return ResponseEntity.badRequest().body(Map.of("error", "invalid recipient", "run", run));
    }
    if ("provider-down".equals(body.get("recipient"))) {
      return ResponseEntity.status(502).body(Map.of("error", "provider down", "run", run));
    }
    if ("explode".equals(body.get("recipient"))) {
      throw new IllegalStateException("handler bug, run " + run);
    }
    String id = "n_" + run;
    return ResponseEntity.created(URI.create("/notifications/" + id))
        .header("X-Notification-Id", id)
        .header("X-Not-Listed", "run-" + run)
        .header("X-Provider-Key", context.providerKey())
        .body(Map.of("notification_id", id, "channel", body.getOrDefault("channel", "sms")));
  }

  @PostMapping("/orders/{orderId}/receipt")
  @IdempotentEndpoint(required = false, ttl = "PT1H")
  public Map<String, Object> receipt(@PathVariable String orderId) {
    return Map.of("order", orderId, "run", runs.increment());
  }

  @PostMapping("/plain")
  public Map<String, Object> plain() {
    return Map.of("run", runs.increment());
  }

  @GetMapping("/health-check")
  public String healthCheck() {
    return "ok";
  }
}
