/**
 * Micrometer metrics and observations of the idempotency guard: {@link
 * dev.idempotency.micrometer.MicrometerIdempotencyObserver}.
 */
package dev.idempotency.micrometer;
