package dev.idempotency.spring.app;

/** What a provider answers: the tests store and replay it as JSON. */
public record Receipt(String id, String channel, int parts) {}
