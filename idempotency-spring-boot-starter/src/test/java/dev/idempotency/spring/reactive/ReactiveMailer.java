package dev.idempotency.spring.reactive;

import dev.idempotency.spring.Idempotent;
import java.time.Duration;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/** A provider client with a non-blocking API, guarded by {@link Idempotent} on {@code Mono}s. */
public class ReactiveMailer {

  /** What a send returns. */
  public record Sent(String id, String order) {}

  private final AtomicInteger runs = new AtomicInteger();
  private final Set<String> failedOnce = ConcurrentHashMap.newKeySet();
  private final Map<String, Sinks.One<Sent>> held = new ConcurrentHashMap<>();

  /** How many sends started. */
  public int runs() {
    return runs.get();
  }

  /** A send that answers after a few milliseconds, on Reactor's {@code parallel} scheduler. */
  @Idempotent(key = "#order")
  public Mono<Sent> send(String order) {
    return Mono.defer(
        () -> {
          int run = runs.incrementAndGet();
          return Mono.just(new Sent("sent-" + run, order)).delayElement(Duration.ofMillis(20));
        });
  }

  /** Fails the first time for an order (a provider outage), then sends. */
  @Idempotent(key = "#order")
  public Mono<Sent> failOnce(String order) {
    return Mono.defer(
        () -> {
          int run = runs.incrementAndGet();
          if (failedOnce.add(order)) {
            return Mono.error(new IllegalStateException("provider unavailable for " + order));
          }
          return Mono.just(new Sent("sent-" + run, order));
        });
  }

  /** A send that answers when the test says so ({@link #answer}). */
  @Idempotent(key = "#order")
  public Mono<Sent> held(String order) {
    return Mono.defer(
        () -> {
          runs.incrementAndGet();
          return held.computeIfAbsent(order, o -> Sinks.one()).asMono();
        });
  }

  /** Lets the held send of an order answer. */
  public void answer(String order, Sent sent) {
    held.computeIfAbsent(order, o -> Sinks.one()).tryEmitValue(sent);
  }

  /** Sends as the user the subscriber's Reactor context names. */
  @Idempotent(key = "#order")
  public Mono<Sent> asTheSubscriber(String order) {
    return Mono.deferContextual(
        context -> {
          runs.incrementAndGet();
          return Mono.just(new Sent(context.get("user"), order));
        });
  }

  /** Sends and returns nothing. */
  @Idempotent(key = "#order")
  public Mono<Void> sendQuietly(String order) {
    return Mono.fromRunnable(runs::incrementAndGet);
  }
}
