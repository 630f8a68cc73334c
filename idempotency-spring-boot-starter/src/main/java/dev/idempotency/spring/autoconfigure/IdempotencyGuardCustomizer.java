package dev.idempotency.spring.autoconfigure;

import dev.idempotency.IdempotencyGuard;

/**
 * Changes the auto-configured guard's builder after the {@code idempotency.*} properties are
 * applied: for settings that have no property (executors, the clock, raw keys at rest). Beans of
 * this type are applied in their order.
 */
@FunctionalInterface
public interface IdempotencyGuardCustomizer {

  /**
   * Customizes the builder.
   *
   * @param builder the builder, with the store and the properties set
   */
  void customize(IdempotencyGuard.Builder builder);
}
