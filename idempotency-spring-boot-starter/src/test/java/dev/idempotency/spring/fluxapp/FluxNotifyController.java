package dev.idempotency.spring.fluxapp;

import dev.idempotency.SendContext;
import dev.idempotency.spring.app.Runs;
import dev.idempotency.spring.web.IdempotentEndpoint;
import java.net.URI;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RestController;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * {@code NotifyController}'s endpoints on WebFlux. A held run waits on a {@code boundedElastic}
 * thread, never on the event loop.
 */
@RestController
public class FluxNotifyController {

  private final Runs runs;
  private final AtomicReference<CountDownLatch> gate = new AtomicReference<>();
  private final AtomicReference<CountDownLatch> entered =
      new AtomicReference<>(new CountDownLatch(1));

  public FluxNotifyController(Runs runs) {
    this.runs = runs;
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

  private Mono<Void> held() {
    CountDownLatch latch = gate.get();
    if (latch == null) {
      return Mono.empty();
    }
    entered.get().countDown();
    return Mono.fromCallable(() -> latch.await(30, TimeUnit.SECONDS))
        .subscribeOn(Schedulers.boundedElastic())
        .then();
  }

  @PostMapping("/notify")
  @IdempotentEndpoint(headers = "X-Notification-Id")
  public Mono<ResponseEntity<Map<String, Object>>> notify(
      @RequestBody Map<String, Object> body, SendContext context) {
    return held().then(Mono.fromSupplier(() -> answer(body, context)));
  }

  private ResponseEntity<Map<String, Object>> answer(
      Map<String, Object> body, SendContext context) {
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
}
