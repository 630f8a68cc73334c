package dev.idempotency.spring.messaging;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The key of the brokers' {@code keyed} listeners, {@code
 * T(dev.idempotency.spring.messaging.KeyEvaluations).keyOf(#event)}: counts each evaluation (one
 * per delivery of the event) and gives, by the payload's prefix, a key that cannot be used.
 */
public final class KeyEvaluations {

  private static final Map<String, AtomicInteger> EVALUATIONS = new ConcurrentHashMap<>();

  private KeyEvaluations() {}

  /** The kinds of unusable key, by payload prefix. */
  public enum Kind {
    /** Too long once namespaced by the listener's name. */
    TOO_LONG,
    /** Holds a control character. */
    CONTROL,
    /** Blank. */
    BLANK,
    /** An object whose class does not override {@code toString()}. */
    IDENTITY
  }

  /** An event whose class has no {@code toString()} of its own. */
  public static final class Opaque {
    final String id;

    Opaque(String id) {
      this.id = id;
    }
  }

  /**
   * Counts the evaluation and gives the key.
   *
   * @param event the payload
   * @return the key: unusable as the payload's prefix says, else the payload
   */
  public static Object keyOf(String event) {
    EVALUATIONS.computeIfAbsent(event, e -> new AtomicInteger()).incrementAndGet();
    for (Kind kind : Kind.values()) {
      if (event.startsWith(kind.name())) {
        return switch (kind) {
          case TOO_LONG -> event + "x".repeat(1_100);
          case CONTROL -> event + "\u0007";
          case BLANK -> "   ";
          case IDENTITY -> new Opaque(event);
        };
      }
    }
    return event;
  }

  /** How many deliveries of {@code event} had their key evaluated. */
  public static int evaluations(String event) {
    AtomicInteger count = EVALUATIONS.get(event);
    return count == null ? 0 : count.get();
  }
}
