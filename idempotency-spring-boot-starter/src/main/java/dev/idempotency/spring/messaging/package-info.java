/**
 * Message consumers that send once under redelivery: {@link
 * dev.idempotency.spring.messaging.IdempotentListener} on a {@code @KafkaListener},
 * {@code @RabbitListener} or {@code @JmsListener} method (record or batch), and the hooks that tell
 * each broker what to do with a delivery (acknowledge, come back later with backoff, or its own
 * retry and dead-letter policy).
 */
@NullMarked
package dev.idempotency.spring.messaging;

import org.jspecify.annotations.NullMarked;
