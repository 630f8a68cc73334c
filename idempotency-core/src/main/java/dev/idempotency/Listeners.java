package dev.idempotency;

import java.time.Duration;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** Delivers events to listeners, isolating the caller from a listener that throws. */
final class Listeners {

  private static final Logger log = LoggerFactory.getLogger(Listeners.class);

  private final List<IdempotencyListener> listeners;

  Listeners(List<IdempotencyListener> listeners) {
    this.listeners = List.copyOf(listeners);
  }

  void emit(
      IdempotencyEvent.Type type,
      String operation,
      String keyDigest,
      int attempt,
      long nanos,
      Throwable error) {
    if (listeners.isEmpty()) {
      return;
    }
    IdempotencyEvent event =
        new IdempotencyEvent(type, operation, keyDigest, attempt, Duration.ofNanos(nanos), error);
    for (IdempotencyListener listener : listeners) {
      try {
        listener.onEvent(event);
      } catch (RuntimeException e) {
        log.warn("An IdempotencyListener threw on a {} event; ignored", type, e);
      }
    }
  }
}
