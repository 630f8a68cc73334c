package dev.idempotency.examples.worker;

import java.time.Instant;

/**
 * An event with no idempotency key of its own, as many producers emit.
 *
 * @param userId the customer
 * @param orderId the order
 * @param email where to send the notice
 * @param createdAt when the producer created the event: the same on every redelivery
 */
public record OrderShipped(String userId, String orderId, String email, Instant createdAt) {}
