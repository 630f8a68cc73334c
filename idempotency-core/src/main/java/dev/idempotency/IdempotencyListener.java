package dev.idempotency;

/**
 * Receives {@link IdempotencyEvent}s, for metrics or audit logs. Called synchronously on the
 * calling thread, so it must be fast; an exception it throws is logged and otherwise ignored.
 */
@FunctionalInterface
public interface IdempotencyListener {

  /**
   * Called once per event.
   *
   * @param event what happened
   */
  void onEvent(IdempotencyEvent event);
}
