/**
 * Spring Boot auto-configuration of the idempotency guard: {@link
 * dev.idempotency.spring.autoconfigure.IdempotencyAutoConfiguration} (guard, store choice, JSON
 * codecs, {@code @Idempotent} methods) and {@link
 * dev.idempotency.spring.autoconfigure.IdempotencyWebMvcAutoConfiguration}
 * ({@code @IdempotentEndpoint}), with the {@code idempotency.*} properties of {@link
 * dev.idempotency.spring.autoconfigure.IdempotencyProperties}.
 */
@NullMarked
package dev.idempotency.spring.autoconfigure;

import org.jspecify.annotations.NullMarked;
