package dev.idempotency;

import java.time.Duration;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** Delivers events to listeners and observers, isolating the caller from one that throws. */
final class Listeners {

  private static final Logger log = LoggerFactory.getLogger(Listeners.class);

  private final List<IdempotencyListener> listeners;
  private final Observers observers;

  Listeners(List<IdempotencyListener> listeners, Observers observers) {
    this.listeners = List.copyOf(listeners);
    this.observers = observers;
  }

  /** Whether anyone takes events: if not, none need be made. */
  boolean wanted() {
    return !listeners.isEmpty() || !observers.isEmpty();
  }

  static IdempotencyEvent event(
      IdempotencyEvent.Type type,
      String operation,
      String keyDigest,
      int attempt,
      long nanos,
      Throwable error) {
    return new IdempotencyEvent(
        type, operation, keyDigest, attempt, Duration.ofNanos(nanos), error);
  }

  void deliver(IdempotencyEvent event) {
    observers.onEvent(event);
    IdempotencyEvent.Type type = event.type();
    for (IdempotencyListener listener : listeners) {
      try {
        listener.onEvent(event);
      } catch (RuntimeException e) {
        log.warn("An IdempotencyListener threw on a {} event; ignored", type, e);
      }
    }
  }
}
