package dev.idempotency.spring.messaging;

import dev.idempotency.IdempotencyEvent;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.IdempotencyListener;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/** The guard's events, as an application's {@link IdempotencyListener} bean sees them. */
public final class Events implements IdempotencyListener {

  private final List<IdempotencyEvent> events = new CopyOnWriteArrayList<>();

  @Override
  public void onEvent(IdempotencyEvent event) {
    events.add(event);
  }

  /** How many events of a type the key of {@code listener} and {@code value} had. */
  public long count(IdempotencyEvent.Type type, String listener, String value) {
    String digest = IdempotencyKey.digest(IdempotencyKey.of(listener, value));
    return events.stream()
        .filter(event -> event.type() == type && event.keyDigest().equals(digest))
        .count();
  }

  /** The operations of the events of the key of {@code listener} and {@code value}. */
  public List<String> operations(String listener, String value) {
    String digest = IdempotencyKey.digest(IdempotencyKey.of(listener, value));
    return events.stream()
        .filter(event -> event.keyDigest().equals(digest))
        .map(IdempotencyEvent::operation)
        .distinct()
        .toList();
  }
}
