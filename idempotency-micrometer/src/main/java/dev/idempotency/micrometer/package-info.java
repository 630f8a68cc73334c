/**
 * Micrometer metrics and observations of the idempotency guard: {@link
 * dev.idempotency.micrometer.MicrometerIdempotencyObserver}.
 */
@NullMarked
package dev.idempotency.micrometer;

import org.jspecify.annotations.NullMarked;
