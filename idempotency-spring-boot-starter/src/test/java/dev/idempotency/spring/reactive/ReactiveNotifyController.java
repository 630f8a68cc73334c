package dev.idempotency.spring.reactive;

import dev.idempotency.spring.web.IdempotentEndpoint;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.springframework.http.HttpStatus;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RestController;
import reactor.core.publisher.Mono;

/** A WebFlux notify endpoint whose provider answers after a few milliseconds, off the loop. */
@RestController
public class ReactiveNotifyController {

  private final AtomicInteger sends = new AtomicInteger();
  private final ReactiveMailer mailer;

  /**
   * @param mailer the {@code @Idempotent} provider client of the unannotated handlers
   */
  public ReactiveNotifyController(ReactiveMailer mailer) {
    this.mailer = mailer;
  }

  /**
   * Not an idempotent endpoint: calls an {@code @Idempotent} method whose refusals the starter's
   * exception handler answers.
   */
  @PostMapping("/orders/{order}/mail")
  public Mono<ReactiveMailer.Sent> mail(@PathVariable String order) {
    return mailer.send(order);
  }

  /** As {@link #mail}, with a send that answers when the test says so. */
  @PostMapping("/orders/{order}/held")
  public Mono<ReactiveMailer.Sent> held(@PathVariable String order) {
    return mailer.held(order);
  }

  private final AtomicInteger outages = new AtomicInteger();

  /** How many sends the handlers made. */
  public int sends() {
    return sends.get();
  }

  /** Sends a notification: 201 with a Location and a JSON body, and a cookie never replayed. */
  @PostMapping("/notify")
  @IdempotentEndpoint
  public Mono<ResponseEntity<Map<String, Object>>> notify(
      @RequestBody Map<String, Object> message) {
    return Mono.delay(Duration.ofMillis(50))
        .map(
            tick -> {
              int id = sends.incrementAndGet();
              return ResponseEntity.status(HttpStatus.CREATED)
                  .header("Location", "/notifications/n-" + id)
                  .header("Set-Cookie", "session=s-" + id)
                  .body(Map.of("id", "n-" + id, "to", message.get("to")));
            });
  }

  /** The provider is down the first time: 503, which releases the key; then it sends. */
  @PostMapping("/notify/flaky")
  @IdempotentEndpoint
  public Mono<ResponseEntity<String>> flaky(@RequestBody String message) {
    return Mono.fromSupplier(
        () -> {
          int id = sends.incrementAndGet();
          return outages.getAndIncrement() % 2 == 0
              ? ResponseEntity.status(HttpStatus.SERVICE_UNAVAILABLE).body("provider down")
              : ResponseEntity.ok("sent-" + id);
        });
  }
}
