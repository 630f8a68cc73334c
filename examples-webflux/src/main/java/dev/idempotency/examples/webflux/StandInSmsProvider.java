package dev.idempotency.examples.webflux;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import reactor.core.publisher.Mono;

/**
 * A stand-in for the SMS provider, so that the example runs on its own: it accepts each message
 * after {@code provider.delay} (without holding a thread) and records every request it got. A real
 * provider would deduplicate by the idempotency key; this one counts every request, so that a
 * second send would show.
 */
@RestController
public class StandInSmsProvider {

  /** One request the provider got. */
  public record Received(String idempotencyKey, String to, String id) {}

  private final Duration delay;
  private final AtomicInteger ids = new AtomicInteger(800);
  private final List<Received> received = new CopyOnWriteArrayList<>();

  StandInSmsProvider(@Value("${provider.delay:300ms}") Duration delay) {
    this.delay = delay;
  }

  /** Every request the provider got, in order. */
  public List<Received> received() {
    return List.copyOf(received);
  }

  @PostMapping("/provider/sms")
  Mono<Map<String, String>> accept(
      @RequestHeader("Idempotency-Key") String key, @RequestBody Map<String, String> message) {
    return Mono.delay(delay)
        .map(
            tick -> {
              String id = "sms_" + ids.incrementAndGet();
              received.add(new Received(key, message.get("to"), id));
              return Map.of("id", id);
            });
  }
}
