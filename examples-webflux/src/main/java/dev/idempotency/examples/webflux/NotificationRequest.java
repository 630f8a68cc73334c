package dev.idempotency.examples.webflux;

/**
 * The body of {@code POST /notify}.
 *
 * @param recipient the phone number
 * @param text the message
 */
public record NotificationRequest(String recipient, String text) {}
